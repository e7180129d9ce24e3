/**
 * What the OpenAI translation modules share: readers of parsed JSON values (undefined for a value of another type),
 * `fail`, which a translation throws its `UpstreamError` with, and `attempt`, which turns that into a `Left`; and the
 * random ids of messages and tool calls an upstream did not name.
 */
import type { Wire } from "@model-gateway/core"
import { Upstream } from "@model-gateway/core"
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"

type JsonObject = Wire.JsonObject
type UpstreamError = Upstream.UpstreamError
type UpstreamFailure = Upstream.UpstreamFailure

export const asObject = (u: unknown): JsonObject | undefined => (Predicate.isRecord(u) ? u : undefined)

export const asString = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)

export const asNumber = (
  u: unknown
): number | undefined => (typeof u === "number" && Number.isFinite(u) ? u : undefined)

export const asArray = (u: unknown): ReadonlyArray<unknown> | undefined => (Array.isArray(u) ? u : undefined)

export const fail = (kind: UpstreamFailure, message: string): never => {
  throw new Upstream.UpstreamError({ kind, message })
}

/** Runs a translation written with `fail`, turning its failures into a `Left`; bugs still throw. */
export const attempt = <A>(f: () => A): Either.Either<A, UpstreamError> => {
  try {
    return Either.right(f())
  } catch (error) {
    if (error instanceof Upstream.UpstreamError) return Either.left(error)
    throw error
  }
}

export const randomId = (): string => globalThis.crypto.randomUUID().replace(/-/g, "")
