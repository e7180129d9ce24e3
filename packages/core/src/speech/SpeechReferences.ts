/**
 * The reference parts of a speech request (`input_references`, spec 2.3), for stateless voice cloning or voice
 * design, and the six rules they follow, as a pure function (`check`) from the parts to what they ask for: no
 * reference, one to three audio clips each with its optional transcript, or one image.
 *
 * The rules, numbered as in the specification:
 * 1. audio mode takes one to three `input_audio` parts, each optionally paired with a `text` part holding its
 *    transcript;
 * 2. with a single clip the transcript may come before or after it; with several clips each transcript immediately
 *    follows its clip;
 * 3. audio mode is routed only to endpoints that support voice cloning and, with more than one clip, multiple audio
 *    references (see `needs`; the route planner applies it);
 * 4. image mode takes exactly one `image_url` part, and is routed only to endpoints that support image references;
 * 5. the two modes cannot be mixed;
 * 6. an empty array is treated as no reference.
 *
 * A clip's `data` is a base64 data URI of an audio type (`data:audio/wav;base64,...`) or, as OpenRouter's SDK also
 * allows, plain base64; an image's `url` is an http(s) URL or a base64 data URI of an image type.
 */
import * as Either from "effect/Either"

/** A reference audio clip as sent: `{type: "input_audio", input_audio: {data, format?}}`. */
export interface InputAudioPart {
  readonly type: "input_audio"
  readonly input_audio: { readonly data: string; readonly format?: string | undefined }
}

/** A transcript as sent: `{type: "text", text}`. */
export interface TextPart {
  readonly type: "text"
  readonly text: string
}

/** A reference image as sent: `{type: "image_url", image_url: {url}}`. */
export interface ImageUrlPart {
  readonly type: "image_url"
  readonly image_url: { readonly url: string }
}

/** One part of `input_references`. */
export type ReferencePart = InputAudioPart | TextPart | ImageUrlPart

/** A clip with its transcript, as the rules paired them. */
export interface AudioClip {
  /** The data as sent (a data URI or plain base64). */
  readonly data: string
  /** The base64 payload alone. */
  readonly base64: string
  /** From the data URI (`audio/wav`), when it was one. */
  readonly mediaType: string | undefined
  /** The part's `format` (`wav`, `mp3`), when given. */
  readonly format: string | undefined
  readonly transcript: string | undefined
}

/** What the references ask for. */
export type References =
  | { readonly mode: "none" }
  | { readonly mode: "audio"; readonly clips: ReadonlyArray<AudioClip> }
  | { readonly mode: "image"; readonly url: string }

/** A broken rule: its number (none for a malformed part), the offending part's index when there is one, and why. */
export interface Violation {
  readonly rule: 1 | 2 | 4 | 5 | undefined
  readonly index: number | undefined
  readonly message: string
}

/** The capabilities an endpoint needs for the references (rule 3 and rule 4). */
export interface Needs {
  readonly voiceCloning: boolean
  readonly multipleAudioReferences: boolean
  readonly imageReference: boolean
}

/** At most this many clips (rule 1; spec 8). */
export const MAX_CLIPS = 3

/** The largest base64 payload of one clip, in characters (20 MiB, OpenRouter's limit). */
export const MAX_CLIP_BASE64 = 20 * 1024 * 1024

export const NONE: References = { mode: "none" }

const RULES = {
  1: "rule 1: audio mode takes one to three input_audio clips, each optionally paired with one text transcript",
  2: "rule 2: with a single clip its transcript comes just before or just after it; with several clips each " +
    "transcript immediately follows its clip",
  4: "rule 4: image mode takes exactly one image_url part",
  5: "rule 5: audio references (input_audio, text) and an image reference (image_url) cannot be mixed"
} as const

const broken = (rule: 1 | 2 | 4 | 5, index: number | undefined, detail: string): Either.Either<never, Violation> =>
  Either.left({ rule, index, message: `${RULES[rule]} (${detail})` })

const malformed = (index: number, message: string): Either.Either<never, Violation> =>
  Either.left({ rule: undefined, index, message })

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** Standard base64 with its padding, not empty. */
export const isBase64 = (s: string): boolean => s.length > 0 && s.length % 4 === 0 && BASE64.test(s)

const DATA_URI = /^data:([^;,]*)((?:;[^;,]*)*),(.*)$/s

/** A base64 data URI: its media type (lower case) and payload; undefined when it is not one. */
export const parseDataUri = (uri: string): { readonly mediaType: string; readonly base64: string } | undefined => {
  const match = DATA_URI.exec(uri)
  if (match === null) return undefined
  const params = match[2].split(";").slice(1)
  if (params.at(-1)?.toLowerCase() !== "base64") return undefined
  return { mediaType: match[1].toLowerCase(), base64: match[3] }
}

const MEDIA_TYPE = /^[a-z]+\/[a-z0-9][a-z0-9.+-]*$/

const clipOf = (part: InputAudioPart, index: number): Either.Either<AudioClip, Violation> => {
  const data = part.input_audio.data
  const format = part.input_audio.format
  let base64 = data
  let mediaType: string | undefined
  if (data.startsWith("data:")) {
    const uri = parseDataUri(data)
    if (uri === undefined) {
      return malformed(index, "input_audio.data: malformed data URI, expected data:audio/<type>;base64,<data>")
    }
    if (!MEDIA_TYPE.test(uri.mediaType) || !uri.mediaType.startsWith("audio/")) {
      return malformed(index, `input_audio.data: the data URI must be of an audio type, got '${uri.mediaType}'`)
    }
    base64 = uri.base64
    mediaType = uri.mediaType
  }
  if (base64.length > MAX_CLIP_BASE64) {
    return malformed(index, `input_audio.data: at most ${MAX_CLIP_BASE64} characters of base64 are allowed`)
  }
  if (!isBase64(base64)) {
    return malformed(
      index,
      mediaType === undefined
        ? "input_audio.data: must be a base64 data URI (data:audio/<type>;base64,<data>) or base64"
        : "input_audio.data: the data URI's payload is not valid base64"
    )
  }
  return Either.right({ data, base64, mediaType, format, transcript: undefined })
}

const imageOf = (part: ImageUrlPart, index: number): Either.Either<string, Violation> => {
  const url = part.image_url.url
  if (url.startsWith("data:")) {
    const uri = parseDataUri(url)
    if (uri === undefined || !MEDIA_TYPE.test(uri.mediaType) || !uri.mediaType.startsWith("image/")) {
      return malformed(index, "image_url.url: malformed data URI, expected data:image/<type>;base64,<data>")
    }
    if (!isBase64(uri.base64)) return malformed(index, "image_url.url: the data URI's payload is not valid base64")
    return Either.right(url)
  }
  return /^https?:\/\/\S+$/i.test(url)
    ? Either.right(url)
    : malformed(index, "image_url.url: must be an http(s) URL or a base64 data URI of an image")
}

/** Audio mode: the clips paired with their transcripts by rules 1 and 2. */
const audio = (parts: ReadonlyArray<ReferencePart>, clipCount: number): Either.Either<References, Violation> => {
  if (clipCount === 0) return broken(1, 0, "a text transcript was sent without any input_audio clip")
  if (clipCount > MAX_CLIPS) {
    const fourth = parts.reduce<Array<number>>((at, p, i) => (p.type === "input_audio" ? [...at, i] : at), [])
    return broken(1, fourth[MAX_CLIPS], `got ${clipCount} clips`)
  }
  const clips: Array<AudioClip> = []
  // With a single clip a transcript may also come first: [text, input_audio].
  let pending: { readonly text: string; readonly index: number } | undefined
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]
    if (part.type === "text") {
      if (part.text.trim() === "") return malformed(i, "text: a transcript must not be empty")
      const previous = i > 0 ? parts[i - 1] : undefined
      if (previous?.type === "text") return broken(2, i, "two transcripts in a row")
      if (previous?.type === "input_audio") {
        const clip = clips[clips.length - 1]
        if (clip.transcript !== undefined) {
          // [text, input_audio, text]
          return broken(2, i, "a single clip has one transcript, before or after it, not both")
        }
        clips[clips.length - 1] = { ...clip, transcript: part.text }
        continue
      }
      // The first part: allowed only as the transcript of a single clip that follows it.
      if (clipCount > 1) {
        return broken(2, i, "with several clips a transcript must immediately follow its clip, not precede it")
      }
      pending = { text: part.text, index: i }
      continue
    }
    if (part.type !== "input_audio") continue
    const clip = clipOf(part, i)
    if (Either.isLeft(clip)) return Either.left(clip.left)
    if (pending !== undefined) {
      clips.push({ ...clip.right, transcript: pending.text })
      pending = undefined
    } else clips.push(clip.right)
  }
  return Either.right({ mode: "audio", clips })
}

/**
 * Applies the rules to the parts of `input_references`: Right with what they ask for (an empty array asks for
 * nothing), or Left naming the first rule broken and the offending part.
 */
export const check = (parts: ReadonlyArray<ReferencePart>): Either.Either<References, Violation> => {
  if (parts.length === 0) return Either.right(NONE)
  let clips = 0
  let texts = 0
  const images: Array<number> = []
  for (let i = 0; i < parts.length; i++) {
    const type = parts[i].type
    if (type === "input_audio") clips++
    else if (type === "text") texts++
    else images.push(i)
  }
  if (images.length > 0) {
    if (clips + texts > 0) {
      const first = parts.findIndex((p) => p.type !== "image_url")
      return broken(
        5,
        Math.max(first, images[0]),
        clips > 0 ? "an image_url part was sent with input_audio clips" : "an image_url part was sent with a transcript"
      )
    }
    if (images.length > 1) return broken(4, images[1], `got ${images.length} image_url parts`)
    const url = imageOf(parts[images[0]] as ImageUrlPart, images[0])
    return Either.map(url, (url): References => ({ mode: "image", url }))
  }
  return audio(parts, clips)
}

/** What an endpoint must support to take the references (rules 3 and 4). */
export const needs = (references: References): Needs => ({
  voiceCloning: references.mode === "audio",
  multipleAudioReferences: references.mode === "audio" && references.clips.length > 1,
  imageReference: references.mode === "image"
})
