/**
 * Browser clients: cross-origin requests, off unless origins are configured. For an allowed `Origin`, a preflight
 * (`OPTIONS` with `Access-Control-Request-Method`) on a known path answers 204 with the path's methods and the headers
 * the browser asked to send (the SDKs send many of their own, `x-stainless-*` and the like); every other answer to
 * that origin carries `Access-Control-Allow-Origin` and exposes its headers (`request-id`, `retry-after`, the rate
 * limit headers). A request from any other origin, preflight or not, is served as if CORS were off: no CORS headers,
 * so the browser refuses to hand the answer to the page. Non-browser clients (no `Origin`) are untouched.
 */
import * as Effect from "effect/Effect"
import type { GatewayRequest, GatewayResponse } from "./HttpTypes.js"
import { header } from "./HttpTypes.js"
import type * as RouteTable from "./RouteTable.js"

export interface CorsOptions {
  /** Exact origins (`https://app.example.com`), or `*` for any origin. Empty: CORS off. */
  readonly allowedOrigins: ReadonlyArray<string>
  /** How long a browser may cache a preflight's answer; 600 s by default. */
  readonly maxAgeSeconds?: number | undefined
}

/** A header list as the Fetch standard spells it: comma-separated tokens. Anything else is not echoed back. */
const HEADER_LIST = /^[\w!#$%&'*+.^`|~-]+(?:\s*,\s*[\w!#$%&'*+.^`|~-]+)*$/

/** The allowed-origin test, decided once. */
const originTest = (origins: ReadonlyArray<string>): (origin: string) => boolean => {
  if (origins.includes("*")) return () => true
  const allowed = new Set(origins.map((origin) => origin.toLowerCase()))
  return (origin) => allowed.has(origin.toLowerCase())
}

/**
 * Wraps a request handler with CORS for the given table's paths. With no allowed origins it returns the handler
 * itself: CORS off costs nothing.
 */
export const wrap = <R>(
  options: CorsOptions,
  table: RouteTable.Table<R>,
  handler: (request: GatewayRequest) => Effect.Effect<GatewayResponse, never, R>
): (request: GatewayRequest) => Effect.Effect<GatewayResponse, never, R> => {
  if (options.allowedOrigins.length === 0) return handler
  const allowed = originTest(options.allowedOrigins)
  const maxAge = String(options.maxAgeSeconds ?? 600)
  const preflight = (origin: string, allow: string, requested: string | undefined): GatewayResponse => {
    const headers: Record<string, string> = {
      "access-control-allow-origin": origin,
      "access-control-allow-methods": allow,
      "access-control-max-age": maxAge,
      "vary": "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
    }
    if (requested !== undefined && HEADER_LIST.test(requested.trim())) {
      headers["access-control-allow-headers"] = requested.trim()
    }
    return { status: 204, headers, body: { _tag: "Empty" } }
  }
  return (request) => {
    const origin = header(request.headers, "origin")
    if (origin === undefined || !allowed(origin)) return handler(request)
    if (request.method === "OPTIONS" && header(request.headers, "access-control-request-method") !== undefined) {
      const found = table.find(request.path)
      if (found !== undefined) {
        return Effect.succeed(
          preflight(origin, found.handler.allow, header(request.headers, "access-control-request-headers"))
        )
      }
    }
    return Effect.map(handler(request), (response) => ({
      ...response,
      headers: {
        ...response.headers,
        "access-control-allow-origin": origin,
        "access-control-expose-headers": "*",
        "vary": response.headers.vary === undefined ? "Origin" : `${response.headers.vary}, Origin`
      }
    }))
  }
}
