// The fake Anthropic upstream: plain node:http on 127.0.0.1, a fixed answer to POST /v1/messages.
// A request whose body contains `"stream":true` gets the SSE stream (each event its own write, the
// event loop yielded between events, so that the server under test sees it arrive in pieces);
// any other gets the JSON message. Runs in its own process (see bench/run.mjs).
import { createServer } from "node:http"
import { serveChild } from "./child.mjs"
import { MESSAGE, SSE_EVENTS } from "./fixtures.mjs"

const JSON_BODY = Buffer.from(JSON.stringify(MESSAGE))
const JSON_HEADERS = {
  "content-type": "application/json",
  "content-length": String(JSON_BODY.length),
  "request-id": "req_011CUpstreamBenchFixed00000"
}
const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "request-id": "req_011CUpstreamBenchFixed00000"
}
const SSE_CHUNKS = SSE_EVENTS.map((event) => Buffer.from(event))

let requests = 0
let last

const streamTo = (res) => {
  res.writeHead(200, SSE_HEADERS)
  let i = 0
  const next = () => {
    if (res.destroyed) return
    res.write(SSE_CHUNKS[i++])
    if (i < SSE_CHUNKS.length) setImmediate(next)
    else res.end()
  }
  next()
}

await serveChild("upstream", async () => {
  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const chunks = []
    req.on("data", (chunk) => chunks.push(chunk))
    req.on("end", () => {
      requests++
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)
      last = { method: req.method, url: req.url, headers: req.headers, body }
      if (req.method !== "POST" || req.url !== "/v1/messages") {
        res.writeHead(404, { "content-type": "application/json" })
        res.end(JSON.stringify({ type: "error", error: { type: "not_found_error", message: "not found" } }))
      } else if (body.includes("\"stream\":true")) {
        streamTo(res)
      } else {
        res.writeHead(200, JSON_HEADERS)
        res.end(JSON_BODY)
      }
    })
  })
  await new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", resolve)
  })
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
    calls: {
      requests: () => requests,
      last: () => last === undefined ? undefined : { ...last, body: last.body.toString("utf8") }
    }
  }
})
