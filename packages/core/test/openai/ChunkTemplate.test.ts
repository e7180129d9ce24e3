/**
 * A chat chunk filled from a template is what parsing its text gives, and the chat dialect writes it, from the
 * template's frame, byte for byte as it writes that parsed chunk: for any template (padding, `usage: null`, other
 * fields), any text and padding, with usage asked for or not.
 */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import type { FrameContext } from "../../src/execution/Dialect.js"
import type { JsonObject } from "../../src/messages/Wire.js"
import * as ChunkTemplate from "../../src/openai/ChunkTemplate.js"
import * as OpenAiDialects from "../../src/openai/OpenAiDialects.js"
import type { Attempt } from "../../src/routing/RoutePlanner.js"

const context = (): FrameContext => ({
  attempt: { model: { id: "acme/gpt" }, endpoint: { provider: "acme" } } as unknown as Attempt,
  state: { usage: undefined } as unknown as FrameContext["state"],
  charge: () => ({ cost: "0.001" }) as unknown as ReturnType<FrameContext["charge"]>,
  billed: () => ({ cost: "0.001" }) as unknown as ReturnType<FrameContext["billed"]>,
  pipeline: undefined,
  requestId: "req_1"
})

const framesOf = (includeUsage: boolean) =>
  OpenAiDialects.chat({ upstream: {} as never, api: "chat", bodyFor: () => ({}), headers: {} }, { includeUsage }).frames

/** Any string, quotes, backslashes, control characters and astral characters included. */
const text = fc.string({ unit: "binary", maxLength: 40 })

/** A text chunk as OpenAI-compatible servers send them, with the optional fields some of them add. */
const template = fc.record({
  id: fc.string({ unit: "binary", maxLength: 12 }),
  created: fc.integer({ min: 0 }),
  model: fc.string({ unit: "binary", maxLength: 12 }),
  role: fc.boolean(),
  content: text.filter((t) => t !== ""),
  usageNull: fc.boolean(),
  fingerprint: fc.option(fc.string({ maxLength: 8 }), { nil: undefined }),
  padding: fc.option(fc.string({ maxLength: 12 }), { nil: undefined })
}).map((t): JsonObject => {
  const chunk: JsonObject = {
    id: t.id,
    object: "chat.completion.chunk",
    created: t.created,
    model: t.model,
    ...(t.fingerprint === undefined ? {} : { system_fingerprint: t.fingerprint }),
    choices: [{
      index: 0,
      delta: t.role ? { role: "assistant", content: t.content } : { content: t.content },
      logprobs: null,
      finish_reason: null
    }],
    ...(t.usageNull ? { usage: null } : {})
  }
  if (t.padding !== undefined) chunk.obfuscation = t.padding
  return chunk
})

/** The chunk a server would send with `next` (and `padding`) in the template's place, parsed. */
const parsedLike = (chunk: JsonObject, next: string, padding: string | undefined): JsonObject => {
  const copy = JSON.parse(JSON.stringify(chunk)) as JsonObject
  ;((copy.choices as Array<JsonObject>)[0].delta as JsonObject).content = next
  if (padding !== undefined) copy.obfuscation = padding
  return JSON.parse(JSON.stringify(copy)) as JsonObject
}

describe("ChunkTemplate", () => {
  it("fills a chunk equal to the parsed one, and frames it byte for byte as the dialect frames that", () => {
    fc.assert(
      fc.property(template, fc.array(text, { minLength: 1, maxLength: 4 }), fc.boolean(), (chunk, texts, usage) => {
        const made = ChunkTemplate.make(chunk)
        const frames = framesOf(usage)
        const ctx = context()
        for (const next of texts) {
          const padding = typeof chunk.obfuscation === "string" ? `p${next.length}` : undefined
          const filled = ChunkTemplate.fill(made, next, padding)
          const parsed = parsedLike(chunk, next, padding)
          expect(filled).toStrictEqual(parsed)
          expect(JSON.stringify(filled)).toBe(JSON.stringify(parsed))
          expect(frames.frame(filled, ctx)).toBe(frames.frame(parsed, ctx))
        }
        // The template's frame was made and used, not the plain one each time.
        expect(made.frame).toMatchObject({ padded: typeof chunk.obfuscation === "string" })
      }),
      { numRuns: 300 }
    )
  })

  it("leaves the template as it was and marks only what it fills", () => {
    const chunk: JsonObject = {
      id: "c1",
      object: "chat.completion.chunk",
      created: 1,
      model: "up",
      choices: [{ index: 0, delta: { content: "Hel" }, finish_reason: null }],
      obfuscation: "xyz"
    }
    const before = JSON.stringify(chunk)
    const made = ChunkTemplate.make(chunk)
    const filled = ChunkTemplate.fill(made, "lo", "ab")
    expect(JSON.stringify(chunk)).toBe(before)
    expect(ChunkTemplate.templateOf(filled)).toBe(made)
    expect(ChunkTemplate.templateOf(chunk)).toBeUndefined()
    expect(ChunkTemplate.templateOf({ ...filled })).toBeUndefined()
    expect(Object.keys(filled)).toEqual(Object.keys(chunk))
  })

  it("frames a chunk plainly when the template's frame cannot be split around its text", () => {
    // A dialect frame that drops the text cannot be reused: each chunk is framed by it.
    const chunk: JsonObject = { choices: [{ index: 0, delta: { content: "a" }, finish_reason: null }] }
    const made = ChunkTemplate.make(chunk)
    const frame = (c: JsonObject) =>
      `n=${String(((c.choices as Array<JsonObject>)[0].delta as JsonObject).content).length}`
    expect(ChunkTemplate.frameWith(ChunkTemplate.fill(made, "abc", undefined), frame, undefined)).toBe("n=3")
    expect(made.frame).toBeNull()
    expect(ChunkTemplate.frameWith(ChunkTemplate.fill(made, "abcd", undefined), frame, undefined)).toBe("n=4")
  })
})
