// The gateway's own work per request, without any I/O: the compiled handler run through the gateway's
// runtime on an in-memory request, with the Anthropic adapter replaced by an in-process stub that
// answers the fixture message (see bench/fixtures.mjs). Everything else is the real thing: key check,
// validation, routing, cost, usage record, response building and serialisation.
//
// Complements bench/run.mjs: the HTTP benchmark measures the whole process under load (and is noisy on
// a shared machine); this one isolates the part that is the gateway's own code and the Effect runtime.
//
//   npm run build && node bench/handler.mjs
//   node --cpu-prof --cpu-prof-dir bench/.prof bench/handler.mjs     (then node bench/profile-top.mjs FILE)
// BENCH_HANDLER_N sets the requests per round (default 20000); there are 8 rounds, the first ones warm up.
import { Config, Gateway } from "@model-gateway/example-node-server"
import { Effect } from "effect"
import { CLIENT_KEY, EXPECTED_COST, MESSAGE, PRICING, requestBody, requestHeaders, UPSTREAM_KEY } from "./fixtures.mjs"

const N = Number(process.env.BENCH_HANDLER_N ?? 20_000)
const ROUNDS = 8

const { config } = Config.decode({
  server: { host: "127.0.0.1", port: 0 },
  storage: "memory:",
  providers: { up: { kind: "anthropic", baseUrl: "http://127.0.0.1:9", apiKey: UPSTREAM_KEY } },
  models: { "bench/model": { endpoints: [{ provider: "up", upstreamModel: "m", pricing: PRICING }] } },
  keys: [{ key: CLIENT_KEY, management: true }]
})
const upstreamText = JSON.stringify(MESSAGE)
const stub = {
  createMessage: () => Effect.sync(() => JSON.parse(upstreamText)),
  streamMessage: () => {
    throw new Error("bench/handler.mjs measures non-streaming requests only")
  }
}
const gateway = await Gateway.makeGateway(config, { upstreams: { up: stub } })

const body = Buffer.from(requestBody(false))
const headers = { ...requestHeaders, host: "127.0.0.1", connection: "keep-alive", "content-length": String(body.length) }
const request = () => ({ method: "POST", path: "/v1/messages", headers, body: Effect.succeed(body) })

const first = await gateway.runtime.runPromise(gateway.handler(request()))
const parsed = JSON.parse(first.body.text ?? "{}")
if (first.status !== 200 || parsed.model !== "bench/model" || parsed.usage?.cost !== EXPECTED_COST) {
  console.error(`unexpected answer: ${first.status} ${first.body.text}`)
  process.exit(1)
}

console.log(`gateway handler, in-memory upstream stub: ${ROUNDS} rounds of ${N} sequential requests`)
const results = []
for (let round = 1; round <= ROUNDS; round++) {
  const before = process.cpuUsage()
  for (let i = 0; i < N; i++) {
    const response = await gateway.runtime.runPromise(gateway.handler(request()))
    if (response.status !== 200) throw new Error(`status ${response.status}`)
  }
  const used = process.cpuUsage(before)
  const perRequest = (used.user + used.system) / N
  results.push(perRequest)
  console.log(`  round ${round}: ${perRequest.toFixed(1)} µs CPU/request`)
}
const steady = results.slice(ROUNDS / 2).sort((a, b) => a - b)
const mid = steady.length >> 1
const median = steady.length % 2 === 1 ? steady[mid] : (steady[mid - 1] + steady[mid]) / 2
console.log(`median of the last ${steady.length} rounds: ${median.toFixed(1)} µs CPU/request`)
await gateway.dispose()
process.exit(0)
