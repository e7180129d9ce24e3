import { describe, expect, it } from "@effect/vitest"
import { ResponseHealer } from "@model-gateway/core"
import { Effect, Either } from "effect"
import * as JsonSchemaHealer from "../../src/plugins/JsonSchemaHealer.js"

const schema = {
  type: "object",
  properties: {
    name: { type: "string" },
    tags: { type: "array", items: { type: "string" } },
    score: { type: "number" }
  },
  required: ["name", "score"],
  additionalProperties: false
}

const expected = { name: "gateway", tags: ["a", "b"], score: 4.5 }

/** A healer whose validator compiler (ajv, loaded with the first schema) is loaded: then it heals synchronously. */
const loaded = async (options?: JsonSchemaHealer.JsonSchemaHealerOptions) => {
  const healer = JsonSchemaHealer.make(options)
  await Effect.runPromise(Effect.either(healer.heal("{}", true)))
  return healer
}

const healer = await loaded()
const heal = (text: string, s: unknown = schema) => Effect.runSync(Effect.either(healer.heal(text, s)))
const healed = (text: string, s: unknown = schema) => Either.getOrThrow(heal(text, s))
const failure = (text: string, s: unknown = schema) => {
  const result = heal(text, s)
  if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
  return result.left
}

describe("JsonSchemaHealer", () => {
  it("passes valid JSON through unrepaired", () => {
    expect(healed(` ${JSON.stringify(expected)}\n`)).toEqual({ value: expected, repaired: false })
  })

  it.each([
    ["a ```json fence", "```json\n{\"name\": \"gateway\", \"tags\": [\"a\", \"b\"], \"score\": 4.5}\n```"],
    [
      "a bare fence with prose",
      "Here it is:\n```\n{\"name\": \"gateway\", \"tags\": [\"a\", \"b\"], \"score\": 4.5}\n```\nDone."
    ],
    ["trailing commas", "{\"name\": \"gateway\", \"tags\": [\"a\", \"b\",], \"score\": 4.5,}"],
    ["unquoted keys", "{name: \"gateway\", tags: [\"a\", \"b\"], score: 4.5}"],
    [
      "prose around",
      "Sure! Here is the JSON you asked for: {\"name\": \"gateway\", \"tags\": [\"a\", \"b\"], \"score\": 4.5} Let me know {if} you need more."
    ],
    ["single quotes", "{'name': 'gateway', 'tags': ['a', 'b'], 'score': 4.5}"],
    ["comments", "{\n  // the name\n  \"name\": \"gateway\", /* tags */ \"tags\": [\"a\", \"b\"], \"score\": 4.5\n}"],
    ["a cut-off end", "{\"name\": \"gateway\", \"tags\": [\"a\", \"b\"], \"score\": 4.5"],
    [
      "a bracketed note before the JSON",
      "[1] See below.\n{\"name\": \"gateway\", \"tags\": [\"a\", \"b\"], \"score\": 4.5}"
    ],
    ["everything at once", "```json\nOk: {name: 'gateway', tags: ['a', 'b',], score: 4.5,} // done\n```"]
  ])("repairs %s", (_, text) => {
    expect(healed(text)).toEqual({ value: expected, repaired: true })
  })

  it("reports every schema violation", () => {
    const error = failure("{\"tags\": [\"a\", 1], \"score\": \"high\", \"extra\": true}")
    expect(error).toBeInstanceOf(ResponseHealer.HealingFailed)
    expect(error.reason).toBe("schema_violation")
    expect(error.issues).toEqual(expect.arrayContaining([
      "/ must have required property 'name'",
      "/ must NOT have additional properties ('extra')",
      "/tags/1 must be string",
      "/score must be number"
    ]))
    expect(error.message).toContain("does not satisfy the requested JSON schema")
    expect(error.message).toContain("/score must be number")
  })

  it("reports violations of repaired JSON too", () => {
    const error = failure("```json\n{name: 'gateway', score: 'x',}\n```")
    expect(error.reason).toBe("schema_violation")
    expect(error.issues).toEqual(["/score must be number"])
  })

  it("says when nothing parseable is there", () => {
    const error = failure("I cannot answer that.")
    expect(error.reason).toBe("unparseable")
    expect(error.issues.length).toBe(1)
    expect(failure("").reason).toBe("unparseable")
  })

  it("validates enums, formats and nested definitions", () => {
    const s = {
      type: "object",
      $defs: { when: { type: "string", format: "date-time" } },
      properties: { kind: { enum: ["a", "b"] }, at: { $ref: "#/$defs/when" } },
      required: ["kind", "at"]
    }
    expect(healed("{\"kind\": \"a\", \"at\": \"2025-01-02T03:04:05Z\"}", s).repaired).toBe(false)
    const error = failure("{\"kind\": \"c\", \"at\": \"tomorrow\"}", s)
    expect(error.issues).toEqual([
      "/kind must be equal to one of the allowed values ([\"a\",\"b\"])",
      "/at must match format \"date-time\""
    ])
  })

  it("reads the schema's dialect: 2020-12 tuples and draft-07 tuples", () => {
    const s2020 = {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "array",
      prefixItems: [{ type: "string" }, { type: "number" }],
      items: false
    }
    expect(healed("[\"a\", 1]", s2020).value).toEqual(["a", 1])
    expect(failure("[\"a\", 1, 2]", s2020).reason).toBe("schema_violation")
    const s07 = { type: "array", items: [{ type: "string" }, { type: "number" }], additionalItems: false }
    expect(healed("[\"a\", 1]", s07).value).toEqual(["a", 1])
    expect(failure("[1, \"a\"]", s07).issues).toEqual(["/0 must be string", "/1 must be number"])
    const s07named = { ...s07, $schema: "http://json-schema.org/draft-07/schema#" }
    expect(failure("[\"a\", 1, 2]", s07named).reason).toBe("schema_violation")
  })

  it("fails with invalid_schema for a schema that cannot be compiled", () => {
    expect(failure("{}", { type: "object", properties: { a: { $ref: "#/$defs/missing" } } }).reason).toBe(
      "invalid_schema"
    )
    expect(failure("{}", "not a schema").reason).toBe("invalid_schema")
    expect(healed("{\"anything\": 1}", true).repaired).toBe(false)
  })

  it("heals on its first call, loading its compiler (ajv) then", async () => {
    const fresh = JsonSchemaHealer.make()
    expect(Either.isRight(await Effect.runPromise(Effect.either(fresh.heal("{\"a\": 1}", { type: "object" }))))).toBe(
      true
    )
  })

  it("reuses compiled schemas and keeps its cache bounded", async () => {
    const small = await loaded({ maxCachedSchemas: 2 })
    const run = (s: unknown, text: string) => Effect.runSync(Effect.either(small.heal(text, s)))
    for (let i = 0; i < 50; i++) {
      const s = { $id: "https://example.com/same-id", type: "object", required: [`k${i % 5}`] }
      expect(Either.isRight(run(s, `{"k${i % 5}": 1}`))).toBe(true)
      expect(Either.isLeft(run(structuredClone(s), "{}"))).toBe(true)
    }
  })
})

describe("JsonSchemaHealer.candidates", () => {
  it("finds fenced blocks first, then each outermost bracketed region, then the whole text", () => {
    expect(JsonSchemaHealer.candidates("a {\"x\": \"}\"} b [1, [2]] c")).toEqual([
      "{\"x\": \"}\"}",
      "[1, [2]]",
      "a {\"x\": \"}\"} b [1, [2]] c"
    ])
    expect(JsonSchemaHealer.candidates("```\n[1]\n```\n```json\n{}\n```")[0]).toBe("{}")
  })
})

describe("JsonSchemaHealer with a string schema", () => {
  it("takes bare prose as the string only when the schema asks for a string", async () => {
    const healer = await loaded()
    const run = (text: string, s: unknown) => Effect.runSync(Effect.either(healer.heal(text, s)))
    expect(run("\"quoted\"", { type: "string" })).toEqual(Either.right({ value: "quoted", repaired: false }))
    expect(run("just words", { type: "string" })).toEqual(Either.right({ value: "just words", repaired: true }))
  })
})
