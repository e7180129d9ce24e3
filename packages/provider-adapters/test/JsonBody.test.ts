/**
 * Request bodies as written upstream: a body derived from the client's JSON text is spliced from that text (fields the
 * gateway kept as they came, byte for byte; changed, added and removed fields as the body says), and means exactly
 * what serialising it would mean, whatever the text's spacing, escapes and nesting; anything the splice cannot be sure
 * of (a key twice, a text that is not one object) is serialised instead.
 */
import { describe, expect, it } from "@effect/vitest"
import { JsonSource, JsonText, Wire } from "@model-gateway/core"
import * as fc from "fast-check"
import * as JsonBody from "../src/internal/JsonBody.js"

/** Pads a text past the size from which sources are recorded, with a field of its own. */
const PAD = "x".repeat(JsonSource.MIN_BYTES)

const textOf = (body: string | ReadonlyArray<Uint8Array>): string =>
  typeof body === "string" ? body : Buffer.concat(body.map((part) => Buffer.from(part))).toString("utf8")

/** Parses `text` as the HTTP edge does, recording its bytes as the source. */
const parsed = (text: string): Wire.JsonObject => {
  const bytes = new Uint8Array(Buffer.from(text))
  const body = JSON.parse(text) as Wire.JsonObject
  JsonSource.record(body, bytes)
  return body
}

/** Parses `text` in pieces, as the HTTP edge does a large body: its source recorded with the fields the walk noted. */
const parsedInPieces = (text: string): Wire.JsonObject => {
  const bytes = new Uint8Array(Buffer.from(text))
  const { fields, value } = JsonText.parse(bytes, (b, start, end) => Buffer.from(b.subarray(start, end)).toString(), 64)
  JsonSource.record(value, bytes, fields)
  return value as Wire.JsonObject
}

const spliced = (body: Wire.JsonObject): string => {
  const out = JsonBody.encode(body)
  expect(typeof out).not.toBe("string")
  return textOf(out)
}

describe("JsonBody.encode", () => {
  it("sends the fields kept as they came, the changed and added ones serialised, the removed ones not at all", () => {
    const text = `{ "model" : "gw/model",\n  "route":"fallback", "temperature": 1.0, "big": 12345678901234567890,` +
      ` "messages": [{"role":"user","content":"a \\"quoted\\" \\\\ {text} [x]"}], "pad": "${PAD}" }`
    const body = parsed(text)
    const forward: Wire.JsonObject = Wire.withField(body, "model", "upstream-model")
    const { route: _route, ...withoutRoute } = forward
    const out = spliced(JsonSource.derive(Object.assign(withoutRoute, { stream: true }), forward))
    expect(out).toContain(`"temperature": 1.0`)
    expect(out).toContain(`"big": 12345678901234567890`)
    expect(out).toContain(`"messages": [{"role":"user","content":"a \\"quoted\\" \\\\ {text} [x]"}]`)
    expect(out).not.toContain("route")
    expect(JSON.parse(out)).toEqual({
      model: "upstream-model",
      temperature: 1,
      big: JSON.parse("12345678901234567890"),
      messages: [{ role: "user", content: "a \"quoted\" \\ {text} [x]" }],
      pad: PAD,
      stream: true
    })
  })

  it("reads keys as JSON.parse does: escaped, and beyond ASCII", () => {
    const body = parsed(`{"mo\\u0064el":"a","caf\u00e9":1,"\\"q\\"":2,"pad":"${PAD}"}`)
    const out = JSON.parse(spliced(Wire.withField(Wire.withField(body, "model", "b"), "café", 3)))
    expect(out).toEqual({ model: "b", café: 3, "\"q\"": 2, pad: PAD })
  })

  it("leaves out what JSON.stringify leaves out, and keeps an own __proto__ field a field", () => {
    const body = parsed(`{"__proto__":{"x":1},"a":1,"pad":"${PAD}"}`)
    const out = spliced(Wire.withField(Wire.withField(body, "a", undefined), "f", () => 1))
    expect(out).toContain(`"__proto__":{"x":1}`)
    expect(Object.getOwnPropertyNames(JSON.parse(out))).toEqual(["__proto__", "pad"])
  })

  it("serialises a text with a key twice (JSON.parse keeps the last; an upstream might read the first)", () => {
    const body = parsed(`{"model":"first","model":"second","pad":"${PAD}"}`)
    const out = JsonBody.encode(Wire.withField(body, "x", 1))
    expect(JSON.parse(textOf(out))).toEqual({ model: "second", pad: PAD, x: 1 })
    expect(textOf(out)).not.toContain("first")
  })

  it("serialises a body with no source: a small one (not recorded), or one made by the gateway", () => {
    const small = parsed(`{"model":"a","n":1.0}`)
    expect(JsonBody.encode(Wire.withField(small, "model", "b"))).toBe(`{"model":"b","n":1}`)
    expect(JsonBody.encode({ model: "m" })).toBe(`{"model":"m"}`)
    // A large one made by the gateway is encoded once, to bytes.
    const large = JsonBody.encode({ pad: "y".repeat(20_000) })
    expect(typeof large).not.toBe("string")
    expect(JSON.parse(textOf(large))).toEqual({ pad: "y".repeat(20_000) })
  })

  // A body the gateway made (a translation) is serialised field by field and element by element into parts under
  // V8's 128 KB string size: the text JSON.stringify gives, whatever the body holds.
  it("serialises a body it made as JSON.stringify does, for any body", () => {
    const leaf = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constant(undefined), fc.constant(() => 1))
    const field = fc.oneof(
      leaf,
      fc.array(leaf, { maxLength: 6 }),
      fc.constant(new Date(0)),
      fc.constant(Object.assign(new Array<number>(2), { 1: 1 }))
    )
    const key = fc.oneof(fc.string(), fc.constantFrom("__proto__", "0", "12", "é"))
    fc.assert(
      // With 16 elements or more in its arrays a body is serialised field by field; with fewer, whole.
      fc.property(fc.dictionary(key, field, { maxKeys: 8 }), fc.array(leaf, { maxLength: 40 }), fc.nat({ max: 3 }), (
        body,
        turns,
        pad
      ) => {
        const value: Record<string, unknown> = {
          ...body,
          turns,
          ...(pad > 0 ? { pad: "p".repeat(pad * 10_000) } : {})
        }
        expect(textOf(JsonBody.encode(value))).toBe(JSON.stringify(value))
      }),
      { numRuns: 500 }
    )
  })

  it("serialises a large body it made in parts of at most a piece, but for an element larger than one", () => {
    const messages = Array.from(
      { length: 2_000 },
      (_, i) => ({ role: "user", content: `message ${i} ${"é".repeat(90)}` })
    )
    const huge = { role: "user", content: "h".repeat(100_000) }
    const value = { model: "m", messages: [...messages, huge], stream: true }
    const out = JsonBody.encode(value)
    expect(typeof out).not.toBe("string")
    const parts = (out as ReadonlyArray<Uint8Array>).map((part) => Buffer.from(part).toString())
    expect(parts.join("")).toBe(JSON.stringify(value))
    expect(parts.filter((part) => part.length > JsonText.PIECE)).toEqual([JSON.stringify(huge)])
    expect(parts.length).toBeGreaterThan(JSON.stringify(messages).length / JsonText.PIECE)
  })

  it("writes fields kept side by side as one run of bytes: a few parts however many fields the body has", () => {
    const many = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`f${i}`, i]))
    const body = parsed(
      JSON.stringify({ model: "gw", ...many, session_id: "s", ...many, tail: true }).replace(
        "\"tail\"",
        "\"g0\":0,\"tail\""
      )
    )
    const { session_id: _session, ...forward } = Wire.withField(body, "model", "up")
    const out = JsonBody.encode(JsonSource.derive(forward, body))
    // `{"model":"up",`, the run of f0..f9999, `,`, the run of g0 and tail, `}`.
    expect(typeof out === "string" ? 0 : out.length).toBe(5)
    expect(JSON.parse(textOf(out))).toEqual(JSON.parse(JSON.stringify(forward)))
  })

  it("splices a body parsed in pieces with the fields its parse noted", () => {
    const text = `{ "model" : "gw",\n "messages": [ {"role":"user","content":"hi"} ],\n "pad": "${PAD}" }`
    const body = parsedInPieces(text)
    expect(JsonSource.of(body)?.fields?.members.map((m) => m.key)).toEqual(["model", "messages", "pad"])
    const out = spliced(Wire.withField(body, "model", "up"))
    expect(out).toContain(`"messages": [ {"role":"user","content":"hi"} ],\n "pad": "${PAD}"`)
    expect(JSON.parse(out)).toEqual({ ...JSON.parse(text), model: "up" })
  })

  it("scans a fallback's body once: the same source spliced for two upstreams", () => {
    const body = parsed(`{"model":"gw","messages":[],"pad":"${PAD}"}`)
    expect(JSON.parse(spliced(Wire.withField(body, "model", "one"))).model).toBe("one")
    expect(JSON.parse(spliced(Wire.withField(body, "model", "two"))).model).toBe("two")
  })

  // Any object, written with any spacing, with any of its fields removed, replaced or kept and others added: the
  // splice means what serialising the body means.
  it("means what JSON.stringify of the body means, for any text and any change", () => {
    const key = fc.oneof(fc.string(), fc.constantFrom("model", "a\"b", "\\", "é", "__proto__", "{", "["))
    const value = fc.jsonValue({ maxDepth: 3 })
    fc.assert(
      fc.property(
        fc.dictionary(key, value, { maxKeys: 8 }),
        fc.array(fc.tuple(key, fc.oneof(fc.constant("remove"), fc.constant("keep"), value)), { maxLength: 6 }),
        fc.constantFrom(0, 1, 2),
        fc.boolean(),
        (object, changes, indent, inPieces) => {
          const text = JSON.stringify({ ...object, pad: PAD }, null, indent)
          const body = inPieces ? parsedInPieces(text) : parsed(text)
          let changed: Wire.JsonObject = body
          for (const [k, change] of changes) {
            if (change === "keep") continue
            if (change === "remove") {
              const copy: Wire.JsonObject = {}
              for (const own of Object.keys(changed)) {
                if (own !== k) Object.defineProperty(copy, own, { value: changed[own], enumerable: true })
              }
              changed = JsonSource.derive(copy, changed)
            } else changed = Wire.withField(changed, k, change)
          }
          const out = textOf(JsonBody.encode(changed))
          expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(changed)))
        }
      ),
      { numRuns: 300 }
    )
  })
})
