// What both pass-through proxies (bench/proxy.mjs, bench/proxy-undici.mjs) do to headers, as any real proxy would:
// hop-by-hop headers dropped both ways, and the client's key (`x-api-key`, or `authorization: Bearer`) replaced by the
// upstream key.
import { UPSTREAM_KEY } from "./fixtures.mjs"

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host"
])

/** `from` without its hop-by-hop headers. */
export const copyHeaders = (from) => {
  const out = {}
  for (const key in from) if (!HOP_BY_HOP.has(key)) out[key] = from[key]
  return out
}

/** A client request's headers as sent upstream. */
export const upstreamHeaders = (from) => {
  const headers = copyHeaders(from)
  if (headers["x-api-key"] !== undefined) headers["x-api-key"] = UPSTREAM_KEY
  if (headers.authorization !== undefined) headers.authorization = `Bearer ${UPSTREAM_KEY}`
  return headers
}

/** The answer to a request the upstream could not take: 502 before the head, a broken answer after it. */
export const upstreamFailed = (res, error) => {
  if (!res.headersSent) {
    res.writeHead(502, { "content-type": "application/json" })
    res.end(JSON.stringify({ type: "error", error: { type: "api_error", message: String(error?.message) } }))
  } else res.destroy()
}
