// `proxy-undici` (optional target, BENCH_TARGETS): the former baseline, a pass-through proxy with no parsing at all.
// node:http server, undici.request over a pooled Agent (configured like the gateway's provider transport: 256
// connections, pipelining 1), the request body piped to the upstream at the same path and the response piped back.
// Hop-by-hop headers are dropped and the client's key is replaced by the upstream key. A client that goes away aborts
// the upstream response, as in the gateway. bench/proxy.mjs (node:http both ways) is the reference.
import { createServer } from "node:http"
import { Agent, request } from "undici"
import { serveChild } from "./child.mjs"
import { copyHeaders, upstreamFailed, upstreamHeaders } from "./proxy-headers.mjs"

const UPSTREAM_URL = process.env.UPSTREAM_URL
if (!UPSTREAM_URL) throw new Error("UPSTREAM_URL is not set")

const agent = new Agent({
  connect: { timeout: 10_000 },
  keepAliveTimeout: 30_000,
  keepAliveMaxTimeout: 600_000,
  connections: 256,
  pipelining: 1
})

const listener = (req, res) => {
  const headers = upstreamHeaders(req.headers)
  request(`${UPSTREAM_URL}${req.url}`, { method: req.method, headers, body: req, dispatcher: agent }).then(
    ({ statusCode, headers: upstreamHeaders, body }) => {
      res.writeHead(statusCode, copyHeaders(upstreamHeaders))
      // body.pipe plus two listeners rather than stream.pipeline: the same error handling, and
      // measurably less CPU per request on this small an answer (pipeline's end-of-stream bookkeeping).
      body.on("error", () => res.destroy())
      res.on("close", () => {
        if (!res.writableFinished) body.destroy()
      })
      body.pipe(res)
    },
    (error) => upstreamFailed(res, error)
  )
}

await serveChild("proxy-undici", async () => {
  const server = createServer({ keepAliveTimeout: 65_000 }, listener)
  await new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", resolve)
  })
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: async () => {
      await new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
      await agent.close()
    }
  }
})
