/**
 * A chat completions message's content as Anthropic content blocks: text, image and PDF parts (cache markers kept),
 * an assistant's tool calls as `tool_use` blocks and a tool message as a `tool_result`. Refusals are thrown as
 * `UpstreamError`s (see `ChatFields`). Pure; no I/O.
 */
import type { Wire } from "@model-gateway/core"
import * as Nesting from "../internal/Nesting.js"
import { arrayField, asObject, asString, fail, isAbsent, isObject, unsupported } from "./ChatFields.js"

type JsonObject = Wire.JsonObject

const withCacheControl = (block: JsonObject, part: JsonObject): JsonObject =>
  part.cache_control === undefined ? block : { ...block, cache_control: part.cache_control }

const textBlock = (text: unknown, part: JsonObject): JsonObject | undefined => {
  const value = asString(text) ?? fail("invalid_request", `a ${String(part.type)} content part needs a string`)
  return value === "" ? undefined : withCacheControl({ type: "text", text: value }, part)
}

const parseDataUri = (uri: string): { readonly mediaType: string; readonly data: string } | undefined => {
  if (!uri.startsWith("data:")) return undefined
  const comma = uri.indexOf(",")
  const params = uri.slice(5, comma === -1 ? 5 : comma).split(";")
  if (comma === -1 || params.at(-1)?.toLowerCase() !== "base64" || params[0] === "") {
    return fail("invalid_request", "a data: URI must be of the form data:<media type>;base64,<data>")
  }
  return { mediaType: params[0]!.toLowerCase(), data: uri.slice(comma + 1) }
}

const imageBlock = (part: JsonObject): JsonObject => {
  const image = part.image_url
  const url = asString(image) ?? asString(asObject(image)?.url) ??
    fail("invalid_request", "image_url part without a url")
  const data = parseDataUri(url)
  if (data) {
    if (!data.mediaType.startsWith("image/")) fail("invalid_request", `image_url data of type ${data.mediaType}`)
    return withCacheControl({
      type: "image",
      source: { type: "base64", media_type: data.mediaType, data: data.data }
    }, part)
  }
  if (!/^https?:\/\//i.test(url)) fail("invalid_request", "image_url must be a base64 data: URI or an http(s) URL")
  return withCacheControl({ type: "image", source: { type: "url", url } }, part)
}

const documentBlock = (part: JsonObject): JsonObject => {
  const file = asObject(part.file) ?? fail("invalid_request", "file part without a file")
  if (!isAbsent(file.file_id)) unsupported("a file part referring to an uploaded file_id (send file_data)")
  const uri = asString(file.file_data) ?? fail("invalid_request", "file part without file_data")
  const data = parseDataUri(uri) ?? fail("invalid_request", "file_data must be a base64 data: URI")
  if (data.mediaType !== "application/pdf") unsupported(`a file of type ${data.mediaType} (only application/pdf)`)
  const block: JsonObject = {
    type: "document",
    source: { type: "base64", media_type: data.mediaType, data: data.data }
  }
  if (typeof file.filename === "string" && file.filename !== "") block.title = file.filename
  return withCacheControl(block, part)
}

const partBlock = (role: string, item: unknown): JsonObject | undefined => {
  const part = asObject(item) ?? fail("invalid_request", `${role} message content parts must be objects`)
  switch (part.type) {
    case "text":
      return textBlock(part.text, part)
    case "refusal":
      if (role === "assistant") return textBlock(part.refusal, part)
      break
    case "image_url":
      if (role === "user") return imageBlock(part)
      break
    case "file":
      if (role === "user") return documentBlock(part)
      break
    case "input_audio":
      return unsupported("audio input (an input_audio content part)")
  }
  return unsupported(`a ${role} message content part of type ${String(part.type)}`)
}

/** The blocks of a message's content (a string or parts); empty texts are left out, as Anthropic refuses them. */
export const contentBlocks = (role: string, content: unknown): Array<JsonObject> => {
  if (isAbsent(content)) return []
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }]
  return arrayField(content, `${role} message content`).flatMap((part): Array<JsonObject> => {
    const block = partBlock(role, part)
    return block ? [block] : []
  })
}

const parseArguments = (id: string, raw: unknown): JsonObject => {
  if (isAbsent(raw)) return {}
  if (isObject(raw)) return raw
  const text = asString(raw) ?? fail("invalid_request", `tool call ${id}: function.arguments must be a JSON string`)
  if (text.trim() === "") return {}
  if (Nesting.tooDeep(text, Nesting.MAX_CLIENT_DEPTH)) {
    return fail(
      "invalid_request",
      `tool call ${id}: function.arguments nested deeper than ${Nesting.MAX_CLIENT_DEPTH} levels of objects and arrays`
    )
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return fail("invalid_request", `tool call ${id}: function.arguments is not valid JSON`)
  }
  return asObject(parsed) ?? fail("invalid_request", `tool call ${id}: function.arguments is not a JSON object`)
}

export const toolUseBlock = (item: unknown): JsonObject => {
  const call = asObject(item) ?? fail("invalid_request", "assistant tool_calls entries must be objects")
  const id = asString(call.id) ?? fail("invalid_request", "assistant tool call without an id")
  if (!isAbsent(call.type) && call.type !== "function") unsupported(`tool call ${id} of type ${String(call.type)}`)
  const fn = asObject(call.function) ?? fail("invalid_request", `tool call ${id} without a function`)
  const name = asString(fn.name) ?? fail("invalid_request", `tool call ${id} without a function name`)
  return { type: "tool_use", id, name, input: parseArguments(id, fn.arguments) }
}

export const toolResultBlock = (message: JsonObject): JsonObject => {
  const id = asString(message.tool_call_id) ?? fail("invalid_request", "tool message without tool_call_id")
  const content = typeof message.content === "string" ? message.content : contentBlocks("tool", message.content)
  return content.length === 0
    ? { type: "tool_result", tool_use_id: id }
    : { type: "tool_result", tool_use_id: id, content }
}
