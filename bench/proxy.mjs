// The reference, "the Node floor": a pipe-only node:http proxy, nothing parsed. `http.request` over a keep-alive
// `http.Agent`, the request piped to the upstream at the same path, the response piped back. Hop-by-hop headers are
// dropped and the client's key (`x-api-key`, or `authorization: Bearer`) is replaced by the upstream key, as any real
// proxy would; a client that goes away destroys the upstream request. The agent allows 1,024 sockets (the 1,000-stream
// probe holds 1,000 streams open through it; the load runs use at most 256).
import { Agent, createServer, request } from "node:http"
import { serveChild } from "./child.mjs"
import { copyHeaders, upstreamFailed, upstreamHeaders } from "./proxy-headers.mjs"

const UPSTREAM_URL = process.env.UPSTREAM_URL
if (!UPSTREAM_URL) throw new Error("UPSTREAM_URL is not set")
const upstream = new URL(UPSTREAM_URL)

const agent = new Agent({ keepAlive: true, maxSockets: 1024, maxFreeSockets: 1024, scheduling: "lifo" })

// A diagnostic, off by default: `BENCH_PROXY_SPIN_US=N` spends N µs of pure CPU on each request before forwarding it,
// to see what a slower server pays for the same I/O (docs/benchmarks.md, "Reading it").
const SPIN_US = Number(process.env.BENCH_PROXY_SPIN_US ?? 0)
const spin = () => {
  const until = process.hrtime.bigint() + BigInt(SPIN_US * 1000)
  while (process.hrtime.bigint() < until) {
    // busy
  }
}

const listener = (req, res) => {
  if (SPIN_US > 0) spin()
  const headers = upstreamHeaders(req.headers)
  const out = request({
    host: upstream.hostname,
    port: upstream.port,
    method: req.method,
    path: req.url,
    headers,
    agent
  }, (answer) => {
    res.writeHead(answer.statusCode, copyHeaders(answer.headers))
    answer.on("error", () => res.destroy())
    answer.pipe(res)
  })
  out.on("error", (error) => upstreamFailed(res, error))
  res.on("close", () => {
    if (!res.writableFinished) out.destroy()
  })
  req.pipe(out)
}

await serveChild("proxy", async () => {
  const server = createServer({ keepAliveTimeout: 65_000 }, listener)
  await new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", 4096, resolve)
  })
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: async () => {
      await new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
      agent.destroy()
    }
  }
})
