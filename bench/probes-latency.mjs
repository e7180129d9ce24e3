// The latency probes, with a plain node:http client in the benchmark's process:
//
// - sequential: one keep-alive connection per target, N requests one after another, the targets taken in turn request
//   by request (so that drift favours none). JSON: the time to the whole answer; streams: the time to the first byte of
//   the body (the first event). Reported as p50/p99 per target and as added latency, the target's percentile minus
//   direct's.
// - inter-chunk: the upstream streams 64 deltas 20 ms apart, each carrying the CLOCK_MONOTONIC time it was written
//   (process.hrtime.bigint(), the same clock in every process of the machine); the client notes each delta's arrival
//   on the same clock. 32 streams at once per target, their starts spread evenly over one 20 ms interval (independent
//   streams are not in phase). Reported: p50/p99 of arrival minus writing per target, and added delay, the target's
//   percentile minus direct's in the same round (median over rounds, and each round). On a busy machine direct's own
//   p99 is scheduling noise of several ms, and the added p99 with it.
import { Agent, request } from "node:http"
import { callChild } from "./children.mjs"
import { fmt, median, percentile } from "./load.mjs"
import { markdown } from "./report.mjs"
import { requestFor } from "./requests.mjs"

const ms = (ns) => Number(ns) / 1e6

/** The first text of a stream's content: an Anthropic `content_block_delta`, or an OpenAI chunk with content. */
const CONTENT = /content_block_delta|"content":"[^"]/

/**
 * One request with node:http. Resolves { status, firstByteMs, firstContentMs, totalMs, text }: firstContentMs is the
 * arrival of the first chunk that carries content (for a stream, its first delta); `onData(chunk, now)` sees each
 * chunk with its arrival time (hrtime bigint).
 */
export const send = (target, req, agent, onData) =>
  new Promise((resolve, reject) => {
    const url = new URL(`${target.url}${req.path}`)
    const start = process.hrtime.bigint()
    const out = request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: "POST",
      agent,
      headers: { ...req.headers, "content-length": Buffer.byteLength(req.body) }
    }, (res) => {
      let first
      let content
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (chunk) => {
        const now = process.hrtime.bigint()
        first ??= now
        if (content === undefined && CONTENT.test(chunk)) content = now
        text += chunk
        onData?.(chunk, now)
      })
      res.on("end", () => {
        const end = process.hrtime.bigint()
        resolve({
          status: res.statusCode,
          firstByteMs: ms((first ?? end) - start),
          firstContentMs: ms((content ?? end) - start),
          totalMs: ms(end - start),
          text
        })
      })
      res.on("error", reject)
    })
    out.on("error", reject)
    out.end(req.body)
  })

const added = (stats, direct) => ({
  p50: stats.p50 - direct.p50,
  p99: stats.p99 - direct.p99
})

const statsOf = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  return { n: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99) }
}

/**
 * Sequential probe: one connection per target, `n` requests each after `warm` unmeasured ones, the targets taken in
 * turn. Portkey is measured in a pass of its own, beside direct: interleaved with the others, its streams (answered
 * whole after ~27 ms) tripled direct's own first byte and the gateway's added one (log, "the sequential probe's
 * warm-up"). Each target's added latency is against direct's in the same pass.
 */
export const sequentialProbe = async (targets, upstream, providers, n, warm) => {
  const results = []
  const portkey = targets.find((t) => t.name === "portkey")
  const direct = targets.find((t) => t.name === "direct")
  const passes = [targets.filter((t) => t !== portkey), ...(portkey === undefined ? [] : [[direct, portkey]])]
  for (const provider of providers) {
    for (const stream of [false, true]) {
      for (const pass of passes) {
        for (const r of await sequentialPass(pass, upstream, provider, stream, n, warm)) {
          // direct once: from the first pass
          if (pass !== passes[0] && r.target === "direct") continue
          results.push(r)
        }
      }
    }
  }
  return results
}

/** One scenario of the sequential probe for `targets` (direct among them), taken in turn request by request. */
const sequentialPass = async (targets, upstream, provider, stream, n, warm) => {
  const agents = new Map(targets.map((t) => [t.name, new Agent({ keepAlive: true, maxSockets: 1 })]))
  const times = new Map(targets.map((t) => [t.name, []]))
  const contentTimes = new Map(targets.map((t) => [t.name, []]))
  const reqs = new Map(targets.map((t) => [t.name, requestFor(t, provider, stream, upstream.url)]))
  for (let i = 0; i < warm + n; i++) {
    // Every iteration starts with another target, so that none always follows the same one.
    for (let k = 0; k < targets.length; k++) {
      const target = targets[(i + k) % targets.length]
      const got = await send(target, reqs.get(target.name), agents.get(target.name))
      if (got.status !== 200) throw new Error(`sequential probe: ${target.name} answered ${got.status}: ${got.text}`)
      if (i >= warm) {
        times.get(target.name).push(stream ? got.firstByteMs : got.totalMs)
        contentTimes.get(target.name).push(got.firstContentMs)
      }
    }
  }
  for (const agent of agents.values()) agent.destroy()
  const direct = statsOf(times.get("direct"))
  const directContent = statsOf(contentTimes.get("direct"))
  return targets.map((target) => {
    const stats = statsOf(times.get(target.name))
    const content = statsOf(contentTimes.get(target.name))
    return {
      provider,
      stream,
      target: target.name,
      ...stats,
      added: added(stats, direct),
      // A stream's first content (its first delta): the gateway holds the stream's head back until then.
      content: stream ? { ...content, added: added(content, directContent) } : undefined
    }
  })
}

const sequentialRow = (r, measure, stats) => [
  `${r.provider}-${r.stream ? "stream" : "json"}`,
  measure,
  r.target,
  fmt(stats.p50, 3),
  fmt(stats.p99, 3),
  r.target === "direct" ? "" : fmt(stats.added.p50, 3),
  r.target === "direct" ? "" : fmt(stats.added.p99, 3)
]

export const sequentialTable = (results) =>
  markdown(
    ["scenario", "measure", "target", "p50 ms", "p99 ms", "added p50 ms", "added p99 ms"],
    results.flatMap((r) =>
      r.stream
        ? [sequentialRow(r, "first byte", r), sequentialRow(r, "first content", r.content)]
        : [sequentialRow(r, "whole answer", r)]
    ),
    [false, false, false, true, true, true, true]
  )

const STAMP = /@@(\d+)@@/g

/** One stream: resolves with the delays (ms) of its deltas, arrival minus writing. */
const timedStream = async (target, req, agent) => {
  const delays = []
  let carry = ""
  const got = await send(target, req, agent, (chunk, now) => {
    const text = carry + chunk
    let end = 0
    for (const match of text.matchAll(STAMP)) {
      delays.push(ms(now - BigInt(match[1])))
      end = match.index + match[0].length
    }
    carry = text.slice(end).slice(-64)
  })
  if (got.status !== 200) throw new Error(`inter-chunk probe: ${target.name} answered ${got.status}: ${got.text.slice(0, 300)}`)
  return delays
}

/**
 * Inter-chunk probe: `streams` streams at once per target and round, `deltas` deltas `intervalMs` apart. Added delay
 * is computed round by round (the target's percentile minus direct's in the same round), then the median over rounds.
 */
export const interChunkProbe = async (targets, upstream, providers, { streams, deltas, intervalMs, rounds }) => {
  await callChild(upstream.child, "configure", { deltas, intervalMs })
  const results = []
  try {
    for (const provider of providers) {
      const delays = new Map(targets.map((t) => [t.name, []]))
      const perRound = new Map(targets.map((t) => [t.name, []]))
      for (let round = 1; round <= rounds; round++) {
        for (const target of round % 2 === 1 ? targets : [...targets].reverse()) {
          const agent = new Agent({ keepAlive: true, maxSockets: streams })
          const req = requestFor(target, provider, true, upstream.url)
          const all = await Promise.all(Array.from({ length: streams }, async (_, i) => {
            await new Promise((resolve) => setTimeout(resolve, (i * intervalMs) / streams))
            return timedStream(target, req, agent)
          }))
          agent.destroy()
          for (const [i, one] of all.entries()) {
            if (one.length !== deltas) {
              throw new Error(`inter-chunk probe: ${target.name} (${provider}) stream ${i}: ${one.length} of ${deltas} deltas`)
            }
          }
          delays.get(target.name).push(...all.flat())
          perRound.get(target.name).push(statsOf(all.flat()))
        }
      }
      const directRounds = perRound.get("direct")
      for (const target of targets) {
        const rounds = perRound.get(target.name).map((stats, i) => added(stats, directRounds[i]))
        results.push({
          provider,
          target: target.name,
          ...statsOf(delays.get(target.name)),
          added: { p50: median(rounds.map((r) => r.p50)), p99: median(rounds.map((r) => r.p99)) },
          addedRounds: rounds
        })
      }
    }
  } finally {
    await callChild(upstream.child, "configure", {})
  }
  return results
}

const byRound = (r, key) => (r.addedRounds.length > 1 ? ` (${r.addedRounds.map((a) => fmt(a[key], 2)).join(", ")})` : "")

export const interChunkTable = (results) =>
  markdown(
    ["upstream", "target", "deltas", "p50 ms", "p99 ms", "added p50 ms (by round)", "added p99 ms (by round)"],
    results.map((r) => [
      r.provider,
      r.target,
      String(r.n),
      fmt(r.p50, 3),
      fmt(r.p99, 3),
      r.target === "direct" ? "" : `${fmt(r.added.p50, 3)}${byRound(r, "p50")}`,
      r.target === "direct" ? "" : `${fmt(r.added.p99, 3)}${byRound(r, "p99")}`
    ]),
    [false, false, true, true, true, true, true]
  )
