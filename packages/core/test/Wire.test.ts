import { describe, expect, it } from "@effect/vitest"
import * as Wire from "../src/messages/Wire.js"

describe("Wire.sseFrame", () => {
  it("serialises an event as a named frame", () => {
    expect(Wire.sseFrame({ type: "ping" })).toBe("event: ping\ndata: {\"type\":\"ping\"}\n\n")
  })

  it("sends an event parsed from the upstream's text as that text, byte for byte", () => {
    const raw =
      "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"caf\\u00e9\"}}"
    const event = Wire.withRawData(JSON.parse(raw) as Wire.StreamEvent, raw)
    expect(Wire.sseFrame(event)).toBe(`event: content_block_delta\ndata: ${raw}\n\n`)
    // the mark is invisible to JSON and to enumeration
    expect(Object.keys(event)).toEqual(["type", "index", "delta"])
    expect(JSON.stringify(event)).toBe(JSON.stringify(JSON.parse(raw)))
  })

  it("serialises a rewritten copy anew: spreads and Object.assign do not carry the upstream's text", () => {
    const raw = "{\"type\":\"message_start\",\"message\":{\"model\":\"upstream-id\"}}"
    const event = Wire.withRawData(JSON.parse(raw) as Wire.StreamEvent, raw)
    const spread = { ...event, message: { model: "gateway/model" } }
    const assigned = Object.assign({}, event, { message: { model: "gateway/model" } })
    for (const copy of [spread, assigned]) {
      expect(Wire.sseFrame(copy)).toBe(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"gateway/model\"}}\n\n"
      )
    }
  })

  it("never sends a multi-line text as one data line", () => {
    const raw = "{\"type\":\"ping\",\n\"x\":1}"
    const event = Wire.withRawData(JSON.parse(raw) as Wire.StreamEvent, raw)
    expect(Wire.sseFrame(event)).toBe("event: ping\ndata: {\"type\":\"ping\",\"x\":1}\n\n")
  })
})

describe("Wire.unparsed", () => {
  const raw = "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}"

  it("is sent as its text, byte for byte, under its type", () => {
    const event = Wire.unparsed("content_block_delta", raw)!
    expect(event.type).toBe("content_block_delta")
    expect(Wire.sseFrame(event)).toBe(`event: content_block_delta\ndata: ${raw}\n\n`)
  })

  it("has no field but its type: a copy does not carry the text", () => {
    const event = Wire.unparsed("content_block_delta", raw)!
    expect(Object.keys(event)).toEqual(["type"])
    expect(Wire.sseFrame({ ...event })).toBe("event: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n\n")
  })

  it("is refused for a text that is not one line holding an object: such an event is to be parsed", () => {
    for (
      const text of ["{\"type\":\"ping\",\n\"x\":1}", "{\"type\":\"ping\"\r}", "[1]", "{\"cut\":", "", " {}", "null"]
    ) {
      expect(Wire.unparsed("ping", text)).toBeUndefined()
    }
    expect(Wire.unparsed("ping", "{}")).toBeDefined()
  })
})

describe("Wire.withField", () => {
  it("is { ...body, [key]: value }: the same keys in the same order, the body untouched", () => {
    const body = { model: "a", max_tokens: 5 }
    expect(Wire.withField(body, "stream", true)).toEqual({ model: "a", max_tokens: 5, stream: true })
    expect(Object.keys(Wire.withField(body, "model", "b"))).toEqual(["model", "max_tokens"])
    expect(body).toEqual({ model: "a", max_tokens: 5 })
  })

  it("keeps an own __proto__ key as a field, never as the prototype", () => {
    const body = JSON.parse("{\"model\":\"a\",\"__proto__\":{\"polluted\":true}}")
    const out = Wire.withField(body, "stream", false)
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype)
    expect(JSON.stringify(out)).toBe("{\"model\":\"a\",\"__proto__\":{\"polluted\":true},\"stream\":false}")
  })
})
