/**
 * The field readers shared by the modules that translate chat completions to and from an Anthropic upstream: plain
 * JSON accessors, and a request's refusal thrown as an `UpstreamError` (caught once, by `toMessagesRequest`).
 */
import { Upstream, Wire } from "@model-gateway/core"

type JsonObject = Wire.JsonObject

export const isObject = Wire.isJsonObject

export const asObject = (u: unknown): JsonObject | undefined => (isObject(u) ? u : undefined)

export const asString = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)

export const asNumber = (u: unknown): number | undefined => typeof u === "number" && Number.isFinite(u) ? u : undefined

export const isAbsent = (u: unknown): u is null | undefined => u === undefined || u === null

export const fail = (kind: Upstream.UpstreamFailure, message: string): never => {
  throw new Upstream.UpstreamError({ kind, message })
}

/** An optional array field: `[]` when absent or null, refused when anything else than an array. */
export const arrayField = (value: unknown, name: string): ReadonlyArray<unknown> => {
  if (isAbsent(value)) return []
  return Array.isArray(value) ? value : fail("invalid_request", `${name} must be an array`)
}

export const unsupported = (what: string): never =>
  fail("unsupported", `${what} cannot be sent to an Anthropic upstream`)
