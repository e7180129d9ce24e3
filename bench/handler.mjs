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
// BENCH_HANDLER_N sets the requests per round (default 20000), BENCH_HANDLER_ROUNDS the rounds (default 8; the
// first half warms up).
// BENCH_BASELINE=DIR (another checkout of this repository, built) loads its gateway too, into the same
// process, and alternates the two round by round: an A/B of two builds whose difference is printed as a
// median of per-round ratios. The speed of a shared machine drifts by up to 2x within minutes, so
// only measurements interleaved like this compare.
import { Config, Gateway, LineWriter, Logging } from "@model-gateway/server"
import { createWriteStream } from "node:fs"
import { Effect } from "effect"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { EXPECTED_COST, gatewayConfig, MESSAGE, requestBody, requestHeaders } from "./fixtures.mjs"

const N = Number(process.env.BENCH_HANDLER_N ?? 20_000)
const ROUNDS = Number(process.env.BENCH_HANDLER_ROUNDS ?? 8)
const BASELINE = process.env.BENCH_BASELINE || undefined

const configInput = gatewayConfig("http://127.0.0.1:9")
const upstreamText = JSON.stringify(MESSAGE)
const body = Buffer.from(requestBody(false))
const headers = { ...requestHeaders, host: "127.0.0.1", connection: "keep-alive", "content-length": String(body.length) }

/** A gateway built from one build's modules (its own `effect` included), with the upstream stubbed. */
const setUp = async (name, modules, effect) => {
  const { config } = modules.Config.decode(configInput)
  const stub = {
    createMessage: () => effect.Effect.sync(() => JSON.parse(upstreamText)),
    streamMessage: () => {
      throw new Error("bench/handler.mjs measures non-streaming requests only")
    }
  }
  // Logs as in production (one line per request), to /dev/null.
  const logging = modules.Logging?.make("logfmt", undefined, modules.LineWriter.make(createWriteStream("/dev/null")))
  const gateway = await modules.Gateway.makeGateway(config, { upstreams: { up: stub }, logging, requestLog: process.env.BENCH_REQUEST_LOG !== "0" })
  const succeed = effect.Effect.succeed
  const request = () => ({ method: "POST", path: "/v1/messages", headers, body: succeed(body) })
  const run = () => gateway.runtime.runPromise(gateway.handler(request()))
  const first = await run()
  const parsed = JSON.parse(first.body.text ?? "{}")
  if (first.status !== 200 || parsed.model !== "bench/model" || parsed.usage?.cost !== EXPECTED_COST) {
    console.error(`${name}: unexpected answer: ${first.status} ${first.body.text}`)
    process.exit(1)
  }
  return { name, run, dispose: () => gateway.dispose(), results: [] }
}

const targets = [await setUp("gateway", { Config, Gateway, LineWriter, Logging }, { Effect })]
if (BASELINE !== undefined) {
  const from = (path) => import(pathToFileURL(join(resolve(BASELINE), path)).href)
  // A build from before the server package had its composition root in examples/node-server.
  const modules = await from("packages/server/dist/index.js").catch(() => from("examples/node-server/dist/index.js"))
  const effect = await from("node_modules/effect/dist/esm/index.js")
  targets.push(await setUp("baseline", modules, effect))
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2
}

console.log(
  `gateway handler, in-memory upstream stub: ${ROUNDS} rounds of ${N} sequential requests` +
    (BASELINE === undefined ? "" : `, alternating with the baseline ${BASELINE}`)
)
for (let round = 1; round <= ROUNDS; round++) {
  for (const target of round % 2 === 1 ? targets : [...targets].reverse()) {
    const before = process.cpuUsage()
    for (let i = 0; i < N; i++) {
      const response = await target.run()
      if (response.status !== 200) throw new Error(`status ${response.status}`)
    }
    const used = process.cpuUsage(before)
    const perRequest = (used.user + used.system) / N
    target.results.push(perRequest)
    console.log(`  round ${round} ${target.name}: ${perRequest.toFixed(1)} µs CPU/request`)
  }
}
const steady = (target) => target.results.slice(ROUNDS / 2)
for (const target of targets) {
  console.log(`${target.name}: median of the last ${ROUNDS / 2} rounds: ${median(steady(target)).toFixed(1)} µs CPU/request`)
}
if (targets.length === 2) {
  const ratios = steady(targets[0]).map((x, i) => x / steady(targets[1])[i])
  console.log(
    `gateway/baseline: ${median(ratios).toFixed(3)}x (by round: ${ratios.map((r) => r.toFixed(3)).join(", ")})`
  )
}
for (const target of targets) await target.dispose()
process.exit(0)
