import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import type { ReferencePart, References, Violation } from "../../src/speech/SpeechReferences.js"
import { check, isBase64, MAX_CLIP_BASE64, needs, parseDataUri } from "../../src/speech/SpeechReferences.js"

const WAV = "data:audio/wav;base64,UklGRiQAAABXQVZF"
const MP3 = "data:audio/mpeg;base64,SUQzBAAAAAAA"

const clip = (data = WAV, format?: string): ReferencePart => ({
  type: "input_audio",
  input_audio: format === undefined ? { data } : { data, format }
})
const text = (t = "The transcript."): ReferencePart => ({ type: "text", text: t })
const image = (url = "https://example.com/face.png"): ReferencePart => ({ type: "image_url", image_url: { url } })

const ok = (parts: ReadonlyArray<ReferencePart>): References => {
  const result = check(parts)
  if (Either.isLeft(result)) assert.fail(`expected the references to be accepted, got: ${result.left.message}`)
  return result.right
}

const audio = (parts: ReadonlyArray<ReferencePart>) => {
  const refs = ok(parts)
  if (refs.mode !== "audio") assert.fail(`expected audio mode, got ${refs.mode}`)
  return refs.clips
}

const broken = (parts: ReadonlyArray<ReferencePart>, rule: Violation["rule"], index: number | undefined): Violation => {
  const result = check(parts)
  if (Either.isRight(result)) assert.fail(`expected rule ${rule} to be broken, but the references were accepted`)
  assert.strictEqual(result.left.rule, rule, result.left.message)
  assert.strictEqual(result.left.index, index, result.left.message)
  if (rule !== undefined) assert.include(result.left.message, `rule ${rule}:`)
  return result.left
}

describe("SpeechReferences.check", () => {
  describe("rule 6: an empty array is no reference", () => {
    it("[] asks for nothing", () => {
      assert.deepStrictEqual(ok([]), { mode: "none" })
      assert.deepStrictEqual(needs(ok([])), {
        voiceCloning: false,
        multipleAudioReferences: false,
        imageReference: false
      })
    })
  })

  describe("rule 1: one to three clips", () => {
    it("0 clips: a transcript alone is refused", () => {
      broken([text()], 1, 0)
    })
    it("0 clips: two transcripts alone are refused by rule 1 too", () => {
      broken([text(), text()], 1, 0)
    })
    it("1 clip", () => {
      const clips = audio([clip()])
      assert.strictEqual(clips.length, 1)
      assert.strictEqual(clips[0].mediaType, "audio/wav")
      assert.strictEqual(clips[0].base64, "UklGRiQAAABXQVZF")
      assert.strictEqual(clips[0].data, WAV)
      assert.isUndefined(clips[0].transcript)
    })
    it("2 clips", () => {
      assert.strictEqual(audio([clip(), clip(MP3)]).length, 2)
    })
    it("3 clips, the limit", () => {
      const clips = audio([clip(), clip(), clip()])
      assert.strictEqual(clips.length, 3)
    })
    it("3 clips each with its transcript", () => {
      const clips = audio([clip(), text("one"), clip(), text("two"), clip(), text("three")])
      assert.deepStrictEqual(clips.map((c) => c.transcript), ["one", "two", "three"])
    })
    it("4 clips are refused, naming the fourth", () => {
      const violation = broken([clip(), clip(), clip(), clip()], 1, 3)
      assert.include(violation.message, "got 4 clips")
    })
    it("4 clips with transcripts are refused, naming the fourth clip", () => {
      broken([clip(), text(), clip(), text(), clip(), text(), clip(), text()], 1, 6)
    })
  })

  describe("rule 2: where transcripts go", () => {
    it("a single clip with its transcript after it", () => {
      assert.deepStrictEqual(audio([clip(), text("after")]).map((c) => c.transcript), ["after"])
    })
    it("a single clip with its transcript before it", () => {
      assert.deepStrictEqual(audio([text("before"), clip()]).map((c) => c.transcript), ["before"])
    })
    it("a single clip with a transcript both before and after it is refused", () => {
      broken([text(), clip(), text()], 2, 2)
    })
    it("two transcripts in a row after a single clip are refused", () => {
      const violation = broken([clip(), text(), text()], 2, 2)
      assert.include(violation.message, "two transcripts in a row")
    })
    it("two transcripts in a row before a single clip are refused", () => {
      broken([text(), text(), clip()], 2, 1)
    })
    it("several clips: each transcript right after its clip", () => {
      assert.deepStrictEqual(audio([clip(), text("a"), clip(), text("b")]).map((c) => c.transcript), ["a", "b"])
    })
    it("several clips: some without transcripts", () => {
      assert.deepStrictEqual(audio([clip(), clip(), text("b"), clip()]).map((c) => c.transcript), [
        undefined,
        "b",
        undefined
      ])
      assert.deepStrictEqual(audio([clip(), text("a"), clip(), clip()]).map((c) => c.transcript), [
        "a",
        undefined,
        undefined
      ])
    })
    it("several clips: a transcript before the first clip is refused", () => {
      const violation = broken([text(), clip(), clip()], 2, 0)
      assert.include(violation.message, "immediately follow")
    })
    it("several clips: two transcripts in a row are refused", () => {
      broken([clip(), text(), text(), clip()], 2, 2)
      broken([clip(), clip(), text(), text()], 2, 3)
    })
    it("an empty transcript is refused as malformed", () => {
      broken([clip(), text("  ")], undefined, 1)
    })
  })

  describe("rule 3: audio mode needs voice cloning, several clips multiple audio references", () => {
    it("one clip", () => {
      assert.deepStrictEqual(needs(ok([clip(), text()])), {
        voiceCloning: true,
        multipleAudioReferences: false,
        imageReference: false
      })
    })
    it("two and three clips", () => {
      for (const parts of [[clip(), clip()], [clip(), clip(), clip()]]) {
        assert.deepStrictEqual(needs(ok(parts)), {
          voiceCloning: true,
          multipleAudioReferences: true,
          imageReference: false
        })
      }
    })
  })

  describe("rule 4: exactly one image", () => {
    it("one image, by URL", () => {
      assert.deepStrictEqual(ok([image()]), { mode: "image", url: "https://example.com/face.png" })
      assert.deepStrictEqual(needs(ok([image()])), {
        voiceCloning: false,
        multipleAudioReferences: false,
        imageReference: true
      })
    })
    it("one image, as a data URI", () => {
      assert.strictEqual(ok([image("data:image/png;base64,iVBORw0KGgo=")]).mode, "image")
    })
    it("two images are refused, naming the second", () => {
      broken([image(), image()], 4, 1)
    })
    it("an image URL that is neither http(s) nor a data URI is refused", () => {
      broken([image("ftp://example.com/x.png")], undefined, 0)
      broken([image("")], undefined, 0)
    })
    it("an image data URI of another type, or with bad base64, is refused", () => {
      broken([image("data:audio/wav;base64,UklGRg==")], undefined, 0)
      broken([image("data:image/png;base64,***")], undefined, 0)
      broken([image("data:image/png,notbase64")], undefined, 0)
    })
  })

  describe("rule 5: no mixing", () => {
    it("an image with a clip is refused", () => {
      broken([clip(), image()], 5, 1)
      broken([image(), clip()], 5, 1)
    })
    it("an image with a transcript is refused", () => {
      const violation = broken([image(), text()], 5, 1)
      assert.include(violation.message, "transcript")
    })
    it("mixing is reported before the counts (two images with a clip, four clips with an image)", () => {
      broken([image(), image(), clip()], 5, 2)
      broken([clip(), clip(), clip(), clip(), image()], 5, 4)
    })
  })

  describe("malformed clip data", () => {
    it("a data URI of an audio type, or plain base64, is accepted", () => {
      assert.strictEqual(audio([clip(MP3)])[0].mediaType, "audio/mpeg")
      const plain = audio([clip("UklGRiQAAABXQVZF", "wav")])[0]
      assert.strictEqual(plain.mediaType, undefined)
      assert.strictEqual(plain.format, "wav")
      assert.strictEqual(plain.base64, "UklGRiQAAABXQVZF")
      assert.strictEqual(audio([clip("data:audio/wav;codecs=1;base64,UklGRg==")])[0].base64, "UklGRg==")
    })
    it("a data URI without ;base64 is refused", () => {
      broken([clip("data:audio/wav,UklGRg==")], undefined, 0)
    })
    it("a data URI of another media type is refused", () => {
      const violation = broken([clip("data:text/plain;base64,UklGRg==")], undefined, 0)
      assert.include(violation.message, "audio type")
      broken([clip("data:;base64,UklGRg==")], undefined, 0)
      broken([clip("data:audio;base64,UklGRg==")], undefined, 0)
    })
    it("a data URI without a comma is refused", () => {
      broken([clip("data:audio/wav;base64")], undefined, 0)
    })
    it("a payload that is not base64 is refused", () => {
      broken([clip("data:audio/wav;base64,@@@@")], undefined, 0)
      broken([clip("data:audio/wav;base64,UklGR")], undefined, 0)
      broken([clip("data:audio/wav;base64,")], undefined, 0)
      broken([clip("not base64 at all")], undefined, 0)
      broken([clip("")], undefined, 0)
    })
    it("the bad clip is named among several", () => {
      broken([clip(), text(), clip("data:audio/wav;base64,%%%%")], undefined, 2)
    })
    it("a clip past the size limit is refused", () => {
      const big = `data:audio/wav;base64,${"A".repeat(MAX_CLIP_BASE64 + 4)}`
      const violation = broken([clip(big)], undefined, 0)
      assert.include(violation.message, "at most")
    })
  })

  describe("helpers", () => {
    it("isBase64", () => {
      assert.isTrue(isBase64("AAAA"))
      assert.isTrue(isBase64("AA=="))
      assert.isTrue(isBase64("AAA="))
      assert.isFalse(isBase64(""))
      assert.isFalse(isBase64("AAA"))
      assert.isFalse(isBase64("A==="))
      assert.isFalse(isBase64("AA=A"))
      assert.isFalse(isBase64("AA AA"))
    })
    it("parseDataUri", () => {
      assert.deepStrictEqual(parseDataUri("data:Audio/WAV;base64,AAAA"), { mediaType: "audio/wav", base64: "AAAA" })
      assert.isUndefined(parseDataUri("data:audio/wav,AAAA"))
      assert.isUndefined(parseDataUri("https://x"))
    })
  })
})
