/**
 * A JSON text read from its bytes: its top-level fields, and its value parsed in pieces. The value is always the one
 * JSON.parse gives for the whole text (its key order and a `__proto__` field included), the pieces stay small, and no
 * text JSON.parse refuses is ever accepted: the walk throws instead, and the caller parses the text whole.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as JsonText from "../../src/messages/JsonText.js"

const encoder = new TextEncoder()
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })
const decode: JsonText.Decode = (bytes, start, end) => decoder.decode(bytes.subarray(start, end))

/** The pieces a parse decoded, by length. */
const parseLogged = (text: string, piece: number) => {
  const lengths: Array<number> = []
  const out = JsonText.parse(encoder.encode(text), (bytes, start, end) => {
    lengths.push(end - start)
    return decode(bytes, start, end)
  }, piece)
  return { ...out, lengths }
}

/** What JSON.parse makes of a value, as a text that keeps key order and own `__proto__` fields. */
const same = (value: unknown, text: string) => expect(JSON.stringify(value)).toBe(JSON.stringify(JSON.parse(text)))

/** Whether JSON.parse accepts `text`. */
const accepted = (text: string): boolean => {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

const key = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.constantFrom("model", "a\"b", "\\", "é", "__proto__", "{", "[", "0", "12", "\u2028", "\u0001")
)
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.string({ maxLength: 12 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    tie("array"),
    tie("object")
  ),
  array: fc.array(tie("value"), { maxLength: 5 }),
  object: fc.dictionary(key, tie("value"), { maxKeys: 5 })
}))
const space = fc.constantFrom(undefined, 0, 1, 2, "\t", " \r\n ")

describe("JsonText.parse", () => {
  it("gives what JSON.parse gives, for any object written any way, in pieces of any size", () => {
    fc.assert(
      fc.property(json.object, space, fc.integer({ min: 1, max: 200 }), (object, indent, piece) => {
        const text = JSON.stringify(object, null, indent)
        const { fields, value } = parseLogged(text, piece)
        same(value, text)
        expect(fields).toEqual(JsonText.fields(encoder.encode(text), decode))
      }),
      { numRuns: 1000 }
    )
  })

  it("keeps JSON.parse's answer for a key written twice (the last value, the first place) and notes no fields", () => {
    const text = `{"a":1,"b":[${"1,".repeat(50)}2],"a":{"c":2},"__proto__":{"x":1},"__proto__":[3]}`
    const { fields, value } = JsonText.parse(encoder.encode(text), decode, 8)
    same(value, text)
    expect(Object.keys(value)).toEqual(["a", "b", "__proto__"])
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype)
    expect(Object.getOwnPropertyDescriptor(value, "__proto__")?.value).toEqual([3])
    expect(fields).toBeUndefined()
  })

  it("makes a `__proto__` field of a walked object an own field, never its prototype", () => {
    const text = `{"outer":{"__proto__":{"polluted":true},"pad":"${"p".repeat(100)}"}}`
    const { value } = JsonText.parse(encoder.encode(text), decode, 16)
    const outer = value.outer as Record<string, unknown>
    expect(Object.getOwnPropertyDescriptor(outer, "__proto__")?.value).toEqual({ polluted: true })
    expect(outer.polluted).toBeUndefined()
  })

  it("decodes no more than a piece at once, but for a single value larger than one", () => {
    const message = (n: number) => ({ role: "user", content: [{ type: "text", text: `${n} ${"word ".repeat(40)}` }] })
    const big = "y".repeat(5000)
    const text = JSON.stringify({ model: "m", messages: Array.from({ length: 200 }, (_, n) => message(n)), big })
    const { lengths, value } = parseLogged(text, 1024)
    same(value, text)
    // Every piece but the one string of 5,000 characters (its member between braces) fits in 1,024 bytes and its brackets.
    expect(lengths.filter((length) => length > 1024 + 2)).toEqual([big.length + 2 + `"big":`.length + 2])
    expect(lengths.length).toBeGreaterThan(text.length / 1024)
  })

  it("parses a text nested deeper than it walks", () => {
    const text = `{"a":${"[".repeat(40)}"${"z".repeat(300)}"${"]".repeat(40)},"b":1}`
    const { value } = JsonText.parse(encoder.encode(text), decode, 8)
    same(value, text)
  })

  it("notes the top-level fields where they lie in the bytes", () => {
    const text = ` {"a" : [1, {"b": "]}\\\\"}, "c"] , "é":{"e":[]},"f":-1.5e3 ,"g":null} `
    const bytes = encoder.encode(text)
    const { fields } = JsonText.parse(bytes, decode, 4)
    const slice = (start: number, end: number) => decoder.decode(bytes.subarray(start, end))
    expect(fields!.members.map((m) => [m.key, slice(m.start, m.end)])).toEqual([
      ["a", `"a" : [1, {"b": "]}\\\\"}, "c"]`],
      ["é", `"é":{"e":[]}`],
      ["f", `"f":-1.5e3`],
      ["g", `"g":null`]
    ])
    expect([...fields!.keys]).toEqual(["a", "é", "f", "g"])
  })

  it("never accepts what JSON.parse refuses: any text with any bytes changed", () => {
    const edit = fc.tuple(fc.nat(), fc.nat({ max: 3 }), fc.constantFrom(..."{}[]\",: \\\n\t\u0001\ufeff0-eax\u00e9"))
    fc.assert(
      fc.property(json.object, space, fc.array(edit, { minLength: 1, maxLength: 3 }), fc.integer({ min: 1, max: 64 }), (
        object,
        indent,
        edits,
        piece
      ) => {
        let text = JSON.stringify(object, null, indent)
        for (const [at, removed, inserted] of edits) {
          const i = at % (text.length + 1)
          text = text.slice(0, i) + inserted + text.slice(i + removed)
        }
        let value: unknown
        try {
          value = JsonText.parse(encoder.encode(text), decode, piece).value
        } catch {
          return
        }
        expect(accepted(text)).toBe(true)
        same(value, text)
      }),
      { numRuns: 3000 }
    )
  })

  it("refuses what JSON.parse refuses between the pieces, and what is not one object", () => {
    const refused = [
      `{"a":[1,2],}`,
      `{"a":[1,2] "b":1}`,
      `{"a":[1,2],"b"}`,
      `{"a" [1]}`,
      `{"a":[1,2]`,
      `{"a":[1,2]}}`,
      `{"a":[1,2]} x`,
      `{"a\u0001":[1,2,3,4,5,6]}`,
      `{"a":[1,\ufeff2,3,4,5,6]}`,
      `{"a":[1,2,3,4,5,6],\ufeff"b":1}`,
      `\ufeff{"a":[1,2,3,4,5,6]}`,
      `[{"a":[1,2,3,4,5,6]}]`,
      `"text"`
    ]
    for (const text of refused) {
      expect(() => JsonText.parse(encoder.encode(text), decode, 4), text).toThrow()
    }
    // Bytes that are not UTF-8, inside a piece or inside a walked key.
    const bad = (text: string, at: number) => {
      const bytes = encoder.encode(text)
      bytes[at] = 0xff
      return bytes
    }
    expect(() => JsonText.parse(bad(`{"a":["xxxxxxxx","yyyyyyyy"]}`, 9), decode, 4)).toThrow()
    expect(() => JsonText.parse(bad(`{"kx":["xxxxxxxx","yyyyyyyy"]}`, 3), decode, 4)).toThrow()
  })
})

describe("JsonText.fields", () => {
  it("finds the top-level fields, whatever nests inside their values", () => {
    const text = ` {"a" : [1, {"b": "]}\\\\"}, "c"] , "d":{"e":[]},"f":-1.5e3 ,"g":null}`
    const fields = JsonText.fields(encoder.encode(text), decode)!
    expect(fields.members.map((m) => [m.key, text.slice(m.start, m.end)])).toEqual([
      ["a", `"a" : [1, {"b": "]}\\\\"}, "c"]`],
      ["d", `"d":{"e":[]}`],
      ["f", `"f":-1.5e3`],
      ["g", `"g":null`]
    ])
  })

  it("refuses what is not one object, or has a key twice", () => {
    const fieldsOf = (text: string) => JsonText.fields(encoder.encode(text), decode)
    expect(fieldsOf(`[1]`)).toBeUndefined()
    expect(fieldsOf(`\ufeff{"a":1}`)).toBeUndefined()
    expect(fieldsOf(`{"a":1,"a":2}`)).toBeUndefined()
    expect(fieldsOf(`{"a":1`)).toBeUndefined()
    expect(fieldsOf(`{}`)?.members).toEqual([])
  })
})
