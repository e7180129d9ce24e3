/**
 * JSON Schema validators compiled by `ajv` (drafts 2020-12, 2019-09 and 07, with formats), cached by the schema's JSON
 * text in a bounded LRU map. Its own module so that `ajv` (some 240 KB of code and a compiled meta-schema per draft)
 * is loaded only when a request first asks for a schema to be enforced (see JsonSchemaHealer).
 */
import type { ValidateFunction } from "ajv"
import { Ajv } from "ajv"
import addFormats from "ajv-formats"
import { Ajv2019 } from "ajv/dist/2019.js"
import { Ajv2020 } from "ajv/dist/2020.js"

/** Schemas whose JSON text is longer than this are compiled for each call instead of cached. */
const MAX_CACHED_SCHEMA_CHARS = 100_000

export type Compiled = { readonly validate: ValidateFunction } | { readonly issues: ReadonlyArray<string> }

const ajvOptions = { allErrors: true, strict: false, addUsedSchema: false, logger: false } as const

type AnyAjv = Ajv | Ajv2019 | Ajv2020

const withFormats = <A extends AnyAjv>(ajv: A): A => {
  addFormats.default(ajv as unknown as Ajv, { keywords: false })
  return ajv
}

/** A validator cache of at most `maxCachedSchemas` schemas: schema -> validator, or why the schema is not one. */
export const makeCompiler = (maxCachedSchemas: number): (schema: unknown) => Compiled => {
  const maxCached = Math.max(1, maxCachedSchemas)
  const draft2020 = withFormats(new Ajv2020(ajvOptions))
  let draft07: Ajv | undefined
  let draft2019: Ajv2019 | undefined
  const legacy = () => (draft07 ??= withFormats(new Ajv(ajvOptions)))
  const cache = new Map<string, Compiled>()

  const compileWith = (ajv: AnyAjv, schema: object | boolean): ValidateFunction => {
    try {
      return ajv.compile(schema)
    } finally {
      // the validator is kept here; ajv's own cache is keyed by schema object and would grow per request
      if (typeof schema === "object") ajv.removeSchema(schema)
    }
  }

  const compile = (schema: unknown): Compiled => {
    if (typeof schema === "boolean") return { validate: compileWith(draft2020, schema) }
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
      return { issues: ["the schema must be a JSON object"] }
    }
    const dialect = (schema as { $schema?: unknown }).$schema
    try {
      if (typeof dialect === "string" && dialect.includes("2020-12")) {
        return { validate: compileWith(draft2020, schema) }
      }
      if (typeof dialect === "string" && dialect.includes("2019-09")) {
        return { validate: compileWith(draft2019 ??= withFormats(new Ajv2019(ajvOptions)), schema) }
      }
      if (dialect === undefined) {
        // no dialect named: JSON Schema 2020-12 (what current generators emit), else draft-07 (tuples as `items: [...]`)
        try {
          return { validate: compileWith(draft2020, schema) }
        } catch {
          return { validate: compileWith(legacy(), schema) }
        }
      }
      const { $schema: _, ...rest } = schema as Record<string, unknown>
      return {
        validate: compileWith(legacy(), typeof dialect === "string" && dialect.includes("draft-07") ? schema : rest)
      }
    } catch (error) {
      return { issues: [error instanceof Error ? error.message : String(error)] }
    }
  }

  const validatorFor = (schema: unknown): Compiled => {
    let key: string | undefined
    try {
      key = JSON.stringify(schema)
    } catch {
      key = undefined
    }
    if (key === undefined || key.length > MAX_CACHED_SCHEMA_CHARS) return compile(schema)
    const hit = cache.get(key)
    if (hit !== undefined) {
      cache.delete(key)
      cache.set(key, hit)
      return hit
    }
    const compiled = compile(schema)
    cache.set(key, compiled)
    if (cache.size > maxCached) cache.delete(cache.keys().next().value!)
    return compiled
  }

  return validatorFor
}
