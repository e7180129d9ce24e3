/**
 * Chat chunks read as another chunk with other text. Most chunks of a streamed chat completion are text deltas that
 * differ from the one before only in `choices[0].delta.content` (and, from OpenAI, in a trailing `obfuscation`
 * padding). An adapter that parsed such a chunk keeps it as a template, reads the next ones that match it without
 * parsing them, and gives each as the template with its own text (and padding), marked as made from it (`fill`). The
 * chat dialect then writes a marked chunk from the template's frame, made once (`frameWith`), rather than copying and
 * serialising each: the same bytes, since a JSON text is its values' texts joined by what surrounds them.
 *
 * Nothing else need know: a filled chunk is a plain object equal to what parsing its text gives, the mark a
 * non-enumerable symbol that copies (spread, `Object.assign`) do not carry.
 */
import type { JsonObject } from "../messages/Wire.js"

/** A chunk parsed in full whose only effect is its text: one choice, a delta with `content`, no usage, no finish. */
export interface ChunkTemplate {
  readonly chunk: JsonObject
  /** The dialect's frame of it, made on first use (see `frameWith`); null when it could not be made. */
  frame: Framed | null | undefined
}

/** A template's frame: the text around the delta's text and, when the template has one, around its padding. */
interface Framed {
  readonly before: string
  readonly between: string
  readonly after: string
  readonly padded: boolean
}

const TemplateOf: unique symbol = Symbol.for("@model-gateway/core/ChunkTemplate")

/** The template of a text chunk just parsed. */
export const make = (chunk: JsonObject): ChunkTemplate => ({ chunk, frame: undefined })

/**
 * The template's chunk with `text` as its delta's content and, when given, `padding` as its `obfuscation`: equal to
 * what parsing a chunk that matched the template gives, marked as made from it. The template's other values are
 * shared, never changed.
 */
export const fill = (template: ChunkTemplate, text: string, padding: string | undefined): JsonObject => {
  const chunk = template.chunk
  const choice = (chunk.choices as ReadonlyArray<JsonObject>)[0]
  const delta = Object.assign({}, choice.delta as JsonObject, { content: text })
  const out: JsonObject = Object.assign({}, chunk, { choices: [Object.assign({}, choice, { delta })] })
  if (padding !== undefined) out.obfuscation = padding
  return Object.defineProperty(out, TemplateOf, { value: template, enumerable: false })
}

/** The template `chunk` was filled from, if it was. */
export const templateOf = (chunk: JsonObject): ChunkTemplate | undefined =>
  (chunk as { readonly [TemplateOf]?: ChunkTemplate })[TemplateOf]

// Values no upstream sends: each must appear once in the template's frame, where the chunk's own value goes.
const TEXT = "\u0000model-gateway:text\u0000"
const PADDING = "\u0000model-gateway:padding\u0000"

/** Splits `framed` around the one place `value`'s JSON text stands; undefined unless it stands there exactly once. */
const around = (framed: string, value: string): [string, string] | undefined => {
  const json = JSON.stringify(value)
  const at = framed.indexOf(json)
  if (at === -1 || framed.indexOf(json, at + json.length) !== -1) return undefined
  return [framed.slice(0, at), framed.slice(at + json.length)]
}

const frameOf = <C>(
  template: ChunkTemplate,
  frame: (chunk: JsonObject, context: C) => string,
  context: C
): Framed | null => {
  const padded = typeof template.chunk.obfuscation === "string"
  const framed = frame(fill(template, TEXT, padded ? PADDING : undefined), context)
  const text = around(framed, TEXT)
  if (text === undefined) return null
  if (!padded) return { before: text[0], between: "", after: text[1], padded }
  const padding = around(text[1], PADDING)
  return padding === undefined ? null : { before: text[0], between: padding[0], after: padding[1], padded }
}

/**
 * `frame(chunk, context)`, a filled chunk's made from its template's frame. `frame` must give every chunk of a template
 * (the chunks of one upstream stream) the frame of its values in the same context, and have no effect for a chunk
 * without usage, as a template is.
 */
export const frameWith = <C>(
  chunk: JsonObject,
  frame: (chunk: JsonObject, context: C) => string,
  context: C
): string => {
  const template = templateOf(chunk)
  if (template === undefined) return frame(chunk, context)
  if (template.frame === undefined) template.frame = frameOf(template, frame, context)
  const framed = template.frame
  if (framed === null) return frame(chunk, context)
  const text = JSON.stringify(((chunk.choices as ReadonlyArray<JsonObject>)[0].delta as JsonObject).content)
  return framed.padded
    ? framed.before + text + framed.between + JSON.stringify(chunk.obfuscation) + framed.after
    : framed.before + text + framed.after
}
