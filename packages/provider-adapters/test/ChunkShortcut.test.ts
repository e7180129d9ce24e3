/**
 * The shortcut for streamed chat-completion text chunks: a chunk that repeats the last text chunk but for its text is
 * read without being parsed, and gives exactly what parsing it would. Anything else is parsed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Wire } from "@model-gateway/core"
import { Either } from "effect"
import fc from "fast-check"
import * as ChunkShortcut from "../src/openai/ChunkShortcut.js"
import * as OpenAiTranslate from "../src/openai/OpenAiTranslate.js"

type Json = Wire.JsonObject

/** A chunk as OpenAI writes it (member order included); `extra` members go last, as OpenAI's `obfuscation` does. */
const chunk = (delta: Json, options: { finish?: string | null; extra?: Json; id?: string } = {}): Json => ({
  id: options.id ?? "chatcmpl-Abc123",
  object: "chat.completion.chunk",
  created: 1763900000,
  model: "gpt-4o-mini-2024-07-18",
  service_tier: "default",
  system_fingerprint: "fp_560af6e559",
  choices: [{ index: 0, delta, logprobs: null, finish_reason: options.finish ?? null }],
  ...options.extra
})

const text = (content: string, extra?: Json): string => JSON.stringify(chunk({ content }, { extra }))

/** A shortcut that has learned from `data` (parsed as the reader does). */
const learned = (data: string): ChunkShortcut.ChunkShortcut => {
  const shortcut = ChunkShortcut.make()
  shortcut.learn(data, JSON.parse(data) as Json)
  return shortcut
}

describe("ChunkShortcut", () => {
  it("reads the text of a chunk that repeats the last text chunk but for its text, escapes included", () => {
    const shortcut = learned(text("Hello"))
    assert.strictEqual(shortcut.text(text(" world")), " world")
    for (const content of ["say \"hi\"\n", "tab\there \\ back", "é ü 日本 🎉", "</script>", "\u2028\u2029", "x"]) {
      assert.strictEqual(shortcut.text(text(content)), content)
    }
    // The same text written with escapes JSON.stringify would not use.
    const escaped = text("PLACEHOLDER").replace("\"PLACEHOLDER\"", "\"\\u00e9\\/\\u0041\"")
    assert.strictEqual(shortcut.text(escaped), "é/A")
  })

  it("gives any text back exactly as parsing would", () => {
    const shortcut = learned(text("first"))
    fc.assert(
      fc.property(fc.string({ unit: "binary", minLength: 1 }), (content) => {
        assert.strictEqual(shortcut.text(text(content)), content)
      }),
      { numRuns: 500 }
    )
  })

  it("reads past OpenAI's obfuscation padding, which changes with every chunk, when it is a plain string", () => {
    const shortcut = learned(text("Hello", { obfuscation: "kQ8" }))
    assert.strictEqual(shortcut.text(text(" there", { obfuscation: "Zx91mP0" })), " there")
    // The padding of the chunk just read, for a caller that passes chunks on (core's `ChunkTemplate`).
    assert.strictEqual(shortcut.padding(), "Zx91mP0")
    assert.strictEqual(shortcut.text(text(" there", { obfuscation: "" })), " there")
    assert.strictEqual(shortcut.padding(), "")
    // A padding with an escape, or no padding at all, is parsed.
    assert.isUndefined(shortcut.text(text(" there", { obfuscation: "a\"b" })))
    assert.isUndefined(shortcut.text(text(" there")))
    // Nor is a member after the padding mistaken for it.
    assert.isUndefined(shortcut.text(`${text(" there", { obfuscation: "abc" }).slice(0, -1)},"usage":{"a":1}}`))
  })

  it("parses every chunk with an effect besides its text", () => {
    const shortcut = learned(text("Hello"))
    const others: Array<Json> = [
      chunk({ content: "Hi" }, { finish: "stop" }),
      chunk({ content: "Hi" }, { extra: { usage: { prompt_tokens: 1, completion_tokens: 2 } } }),
      chunk({ content: "Hi" }, { extra: { error: { message: "overloaded" } } }),
      chunk({ content: "Hi" }, { id: "chatcmpl-other" }),
      chunk({ content: "Hi", role: "assistant" }),
      chunk({ content: "Hi", reasoning_content: "hmm" }),
      chunk({ content: "Hi", tool_calls: [{ index: 0, function: { arguments: "{}" } }] }),
      chunk({ content: null }),
      chunk({ content: 7 }),
      { ...chunk({ content: "Hi" }), created: 1763900001 }
    ]
    for (const other of others) assert.isUndefined(shortcut.text(JSON.stringify(other)), JSON.stringify(other))
    const data = text("Hi")
    // Not JSON: a raw control character, an unterminated string, a bad escape, something after the end.
    assert.isUndefined(shortcut.text(data.replace("\"Hi\"", "\"H\ni\"")))
    assert.isUndefined(shortcut.text(data.slice(0, data.indexOf("\"Hi\"") + 3)))
    assert.isUndefined(shortcut.text(data.replace("\"Hi\"", "\"\\x41\"")))
    assert.isUndefined(shortcut.text(`${data} `))
    assert.isUndefined(shortcut.text(`${data}}`))
  })

  it("learns only from a chunk whose sole effect is its text, its content key unique", () => {
    const never = [
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "Hi" }, { finish: "length" }),
      chunk({ content: "Hi", reasoning: "hmm" }),
      chunk({ content: "Hi" }, { extra: { usage: { prompt_tokens: 1 } } }),
      { ...chunk({ content: "Hi" }), choices: [{ index: 0, delta: { content: "Hi" } }, { index: 1, delta: {} }] },
      // A second `content` key elsewhere: which one is the text cannot be told without parsing.
      chunk({ content: "Hi" }, { extra: { message: { content: "Hi" } } })
    ]
    for (const data of never.map((c) => JSON.stringify(c))) {
      assert.isFalse(ChunkShortcut.make().learn(data, JSON.parse(data) as Json), data)
      const shortcut = learned(data)
      assert.isUndefined(shortcut.text(data), data)
    }
    const eligible = JSON.stringify(chunk({ content: "Hi" }))
    assert.isTrue(ChunkShortcut.make().learn(eligible, JSON.parse(eligible) as Json))
    // The only raw `"content":"` inside another key (`a"content`), the delta's key written with an escape: not the text.
    const disguised = (other: string) =>
      JSON.stringify(chunk({ content: "Hi" }, { extra: { "a\"content": other } })).replace(
        "{\"content\":",
        "{\"\\u0063ontent\":"
      )
    assert.strictEqual(
      (JSON.parse(disguised("Bye")) as { choices: Array<{ delta: Json }> }).choices[0]!.delta.content,
      "Hi"
    )
    assert.isUndefined(learned(disguised("Hi")).text(disguised("Bye")))
    // Spaced JSON (as some servers write it) is not learned, and stays correct by being parsed.
    const spaced = JSON.stringify(chunk({ content: "Hi" }), null, 1).replace(/\n/g, "")
    assert.isUndefined(learned(spaced).text(spaced))
  })

  it("learns again when a server's chunks change shape (a `created` that ticks each second)", () => {
    const reader = ChunkShortcut.make()
    const at = (created: number, content: string) => JSON.stringify({ ...chunk({ content }), created })
    reader.learn(at(1, "a"), JSON.parse(at(1, "a")) as Json)
    assert.strictEqual(reader.text(at(1, "b")), "b")
    assert.isUndefined(reader.text(at(2, "c")))
    reader.learn(at(2, "c"), JSON.parse(at(2, "c")) as Json)
    assert.strictEqual(reader.text(at(2, "d")), "d")
  })
})

describe("ChunkShortcut.reader", () => {
  type Read = (data: string) => Either.Either<ReadonlyArray<Wire.StreamEvent>, { readonly message: string }>
  /** The SSE frames the gateway would write, byte for byte. */
  const frames = (chunks: ReadonlyArray<string>, read: Read): Array<string> =>
    chunks.flatMap((data) => {
      const out = read(data)
      return Either.isLeft(out) ? [`failed: ${out.left.message}`] : out.right.map(Wire.sseFrame)
    })
  /** Every chunk parsed, as before the shortcut. */
  const parsing = (passThrough: boolean): Read => {
    const translator = OpenAiTranslate.makeStreamTranslator("claude-gw", "msg_1", { passThrough })
    return (data) => translator.push(JSON.parse(data) as Json)
  }

  const kinds = fc.oneof(
    fc.string({ unit: "binary" }).map((content) => text(content)),
    fc.string({ unit: "binary" }).map((content) => text(content, { obfuscation: "pad" })),
    fc.constant(JSON.stringify(chunk({ role: "assistant", content: "" }))),
    fc.string().map((reasoning) => JSON.stringify(chunk({ reasoning_content: reasoning }))),
    fc.string().map((content) => JSON.stringify(chunk({ content }, { finish: "stop" }))),
    fc.string().map((args) =>
      JSON.stringify(chunk({ tool_calls: [{ index: 0, id: "call_1", function: { name: "f", arguments: args } }] }))
    ),
    fc.constant(JSON.stringify({ ...chunk({}), choices: [], usage: { prompt_tokens: 3, completion_tokens: 4 } })),
    fc.constant(text("x").replace("\"x\"", "\"\\u00e9\""))
  )

  it("translates any sequence of chunks into exactly the events of parsing each", () => {
    fc.assert(
      fc.property(fc.array(kinds, { maxLength: 30 }), fc.boolean(), (chunks, passThrough) => {
        const translator = OpenAiTranslate.makeStreamTranslator("claude-gw", "msg_1", { passThrough })
        assert.deepStrictEqual(frames(chunks, ChunkShortcut.reader(translator)), frames(chunks, parsing(passThrough)))
      }),
      { numRuns: 300 }
    )
  })

  it("fails on a chunk that is not JSON", () => {
    const read = ChunkShortcut.reader(OpenAiTranslate.makeStreamTranslator("claude-gw"))
    const out = read("{\"id\":")
    assert.isTrue(Either.isLeft(out) && out.left.kind === "transport" && /malformed/.test(out.left.message))
  })
})
