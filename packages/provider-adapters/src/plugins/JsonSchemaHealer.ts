/**
 * The ResponseHealer port with `jsonrepair` and `ajv`. The JSON is located in the answer (inside a
 * code fence, or the outermost object or array among the prose), repaired by `jsonrepair` (trailing
 * commas, unquoted keys, single quotes, comments, a cut-off end, ...) and validated by `ajv` with all
 * errors reported. Compiled validators are cached by the schema's JSON text, in a bounded LRU map
 * (JsonSchemaCompiler, loaded with `ajv` when a schema is first asked for).
 */
import { ResponseHealer } from "@model-gateway/core"
import type { ErrorObject, ValidateFunction } from "ajv"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { jsonrepair } from "jsonrepair"
import type { Compiled } from "./JsonSchemaCompiler.js"

export interface JsonSchemaHealerOptions {
  /** Compiled schemas kept, least recently used dropped first. Default 256. */
  readonly maxCachedSchemas?: number | undefined
}

/** At most this many pieces of the text are tried as the JSON. */
const MAX_CANDIDATES = 8
/** Longer answers are not repaired (jsonrepair takes about 1 µs per character, more with many repairs). */
const MAX_TEXT_CHARS = 1_000_000
/** At most this many schema violations are listed. */
const MAX_ISSUES = 20

const describeErrors = (errors: ReadonlyArray<ErrorObject> | null | undefined): Array<string> => {
  const list = (errors ?? []).map((error) => {
    const at = error.instancePath === "" ? "/" : error.instancePath
    const extra = error.keyword === "additionalProperties"
      ? ` ('${String((error.params as { additionalProperty?: unknown }).additionalProperty)}')`
      : error.keyword === "enum"
      ? ` (${JSON.stringify((error.params as { allowedValues?: unknown }).allowedValues)})`
      : ""
    return `${at} ${error.message ?? error.keyword}${extra}`
  })
  return list.length > MAX_ISSUES
    ? [...list.slice(0, MAX_ISSUES), `and ${list.length - MAX_ISSUES} more`]
    : list
}

/**
 * Where the JSON value starting at `start` (a `{` or `[`) ends: just after its matching bracket, or the
 * end of the text when it never closes (a cut-off answer). Brackets inside strings do not count.
 */
const regionEnd = (text: string, start: number): number => {
  let depth = 0
  let quote: string | undefined
  for (let i = start; i < text.length; i++) {
    const c = text[i]
    if (quote !== undefined) {
      if (c === "\\") i++
      else if (c === quote || (quote === "'" && c === "\n")) quote = undefined
    } else if (c === "\"" || c === "'") {
      quote = c
    } else if (c === "{" || c === "[") {
      depth++
    } else if (c === "}" || c === "]") {
      depth--
      if (depth === 0) return i + 1
    }
  }
  return text.length
}

const FENCE = /```[ \t]*([\w+-]*)[^\n]*\n([\s\S]*?)(?:```|$)/g

/**
 * The pieces of an answer that may be its JSON, most likely first: the contents of code fences (those
 * marked `json` first), then each outermost `{...}` or `[...]` of the text, then the whole text.
 */
export const candidates = (text: string): Array<string> => {
  const out = new Set<string>()
  const fenced: Array<{ json: boolean; body: string }> = []
  for (const match of text.matchAll(FENCE)) {
    fenced.push({ json: /^json/i.test(match[1]), body: match[2].trim() })
    if (fenced.length >= MAX_CANDIDATES) break
  }
  for (const fence of [...fenced.filter((f) => f.json), ...fenced.filter((f) => !f.json)]) {
    if (fence.body !== "") out.add(fence.body)
  }
  let i = 0
  while (out.size < MAX_CANDIDATES) {
    const start = text.slice(i).search(/[{[]/)
    if (start < 0) break
    const end = regionEnd(text, i + start)
    out.add(text.slice(i + start, end))
    i = end
  }
  const whole = text.trim()
  if (whole !== "") out.add(whole)
  return [...out].slice(0, MAX_CANDIDATES + 1)
}

type Parsed = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: string }

const parse = (text: string): Parsed => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) }
  }
}

const repair = (text: string): Parsed => {
  try {
    return { ok: true, value: JSON.parse(jsonrepair(text)) }
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) }
  }
}

/** Heals one answer with a compiled validator: the pure core of the adapter. */
export const healWith = (
  text: string,
  validate: ValidateFunction
): ResponseHealer.Healed | ResponseHealer.HealingFailed => {
  let violations: { size: number; issues: Array<string> } | undefined
  const direct = parse(text)
  if (direct.ok) {
    if (validate(direct.value)) return { value: direct.value, repaired: false }
    violations = { size: text.length, issues: describeErrors(validate.errors) }
  }
  let parseError = direct.ok ? undefined : direct.error
  if (text.length > MAX_TEXT_CHARS) {
    return violations !== undefined
      ? ResponseHealer.healingFailed("schema_violation", violations.issues)
      : ResponseHealer.healingFailed("unparseable", [`the answer is longer than ${MAX_TEXT_CHARS} characters`])
  }
  for (const candidate of candidates(text)) {
    const repaired = repair(candidate)
    if (!repaired.ok) {
      parseError ??= repaired.error
      continue
    }
    if (validate(repaired.value)) return { value: repaired.value, repaired: true }
    if (typeof repaired.value === "string" && !/^["'`]/.test(candidate)) {
      // jsonrepair quotes bare prose: that is a string only if the schema wants one
      parseError ??= "no JSON value found in the answer"
      continue
    }
    if (violations === undefined || candidate.length > violations.size) {
      violations = { size: candidate.length, issues: describeErrors(validate.errors) }
    }
  }
  return violations !== undefined
    ? ResponseHealer.healingFailed("schema_violation", violations.issues)
    : ResponseHealer.healingFailed("unparseable", [parseError ?? "the answer is empty"])
}

/** A ResponseHealer with its own validator cache. */
export const make = (options: JsonSchemaHealerOptions = {}): ResponseHealer.ResponseHealerService => {
  const maxCached = options.maxCachedSchemas ?? 256
  let validatorFor: ((schema: unknown) => Compiled) | undefined
  const load = Effect.promise(() =>
    import("./JsonSchemaCompiler.js").then((module) => validatorFor ??= module.makeCompiler(maxCached))
  )
  const healWithSchema = (text: string, schema: unknown, compile: (schema: unknown) => Compiled) => {
    const compiled = compile(schema)
    if ("issues" in compiled) return Effect.fail(ResponseHealer.healingFailed("invalid_schema", compiled.issues))
    const healed = healWith(text, compiled.validate)
    return healed instanceof ResponseHealer.HealingFailed ? Effect.fail(healed) : Effect.succeed(healed)
  }
  return {
    heal: (text, schema) =>
      Effect.suspend(() =>
        validatorFor !== undefined
          ? healWithSchema(text, schema, validatorFor)
          : Effect.flatMap(load, (compile) => healWithSchema(text, schema, compile))
      )
  }
}

/** The ResponseHealer port backed by `jsonrepair` and `ajv`. */
export const layer = (options: JsonSchemaHealerOptions = {}): Layer.Layer<ResponseHealer.ResponseHealer> =>
  Layer.sync(ResponseHealer.ResponseHealer, () => make(options))
