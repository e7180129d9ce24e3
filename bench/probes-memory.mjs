// The memory probes. Each server's resident set size is read inside its process (over IPC) every `everyMs` while the
// probe runs; the peak is the largest of those readings (not the process's high-water mark, which would include
// whatever ran before).
//
// - sustained: `seconds` of load at 32 connections, half non-streaming and half streamed requests (two autocannon
//   instances of 16 connections), per target.
// - open streams: `streams` streams opened at once through each target (slow ones: 20 deltas 500 ms apart, ~10 s),
//   all held open together; the upstream reports how many it had open at most, i.e. how many the target really held.
//   `bodyKb` > 0 sends each a conversation of that size (BENCH_STREAM_BODY_KB) rather than the one-line fixture.
import { Agent } from "node:http"
import { callChild, sample } from "./children.mjs"
import { fmt, load, mb } from "./load.mjs"
import { send } from "./probes-latency.mjs"
import { markdown } from "./report.mjs"
import { requestFor, withConversation } from "./requests.mjs"

/** Reads the target's RSS every `everyMs` until `stop()`; resolves { peak, samples } once stopped. */
const watchRss = (target, everyMs) => {
  let peak = 0
  let samples = 0
  let running = true
  const done = (async () => {
    while (running) {
      try {
        const { rss } = await sample(target.child, 5_000)
        peak = Math.max(peak, rss)
        samples++
      } catch {
        // a slow answer under load: the next reading will do
      }
      await new Promise((resolve) => setTimeout(resolve, everyMs))
    }
    return { peak, samples }
  })()
  return {
    stop: () => {
      running = false
      return done
    }
  }
}

export const sustainedProbe = async (targets, upstream, provider, seconds, everyMs = 500) => {
  const results = []
  for (const target of targets) {
    process.stdout.write(`  memory   ${target.name.padEnd(12)} ${seconds} s at 32 connections (16 JSON + 16 streams) ... `)
    const before = await sample(target.child)
    const watch = watchRss(target, everyMs)
    const base = { provider, latencyMs: 0 }
    const [json, stream] = await Promise.all([
      load(target, { ...base, stream: false, connections: 16 }, upstream.url, seconds),
      load(target, { ...base, stream: true, connections: 16 }, upstream.url, seconds)
    ])
    const { peak } = await watch.stop()
    const after = await sample(target.child)
    const requests = json.result.requests.total + stream.result.requests.total
    const bad = json.result.errors + json.result.non2xx + stream.result.errors + stream.result.non2xx
    console.log(`${requests} requests${bad > 0 ? ` (${bad} errors/non-2xx)` : ""}, peak RSS ${mb(peak)} MB`)
    results.push({ target: target.name, before: before.rss, peak: Math.max(peak, after.rss), after: after.rss, requests, bad })
  }
  return results
}

export const sustainedTable = (results, seconds) =>
  markdown(
    ["target", "RSS before MB", `peak during ${seconds} s MB`, "after MB", "requests", "errors/non-2xx"],
    results.map((r) => [r.target, mb(r.before), mb(r.peak), mb(r.after), String(r.requests), String(r.bad)]),
    [false, true, true, true, true, true]
  )

export const openStreamsProbe = async (targets, upstream, provider, { streams, deltas = 20, intervalMs = 500, bodyKb = 0 }) => {
  await callChild(upstream.child, "configure", { deltas, intervalMs })
  const results = []
  try {
    for (const target of targets) {
      const size = bodyKb > 0 ? `, ${bodyKb} KB requests` : ""
      process.stdout.write(
        `  streams  ${target.name.padEnd(12)} ${streams} open at once (${deltas} deltas ${intervalMs} ms apart${size}) ... `
      )
      await callChild(upstream.child, "resetStreams")
      const before = await sample(target.child)
      const watch = watchRss(target, 250)
      const agent = new Agent({ keepAlive: false, maxSockets: Infinity })
      const plain = requestFor(target, provider, true, upstream.url)
      const req = bodyKb > 0 ? withConversation(plain, bodyKb) : plain
      const started = performance.now()
      const all = await Promise.allSettled(Array.from({ length: streams }, () => send(target, req, agent)))
      const seconds = (performance.now() - started) / 1000
      agent.destroy()
      const { peak } = await watch.stop()
      const after = await sample(target.child)
      const { max } = await callChild(upstream.child, "streams")
      const complete = all.filter((r) => r.status === "fulfilled" && r.value.status === 200 &&
        (r.value.text.match(/@@\d+@@/g)?.length ?? 0) === deltas).length
      const failed = all.find((r) => r.status === "rejected")?.reason?.message ??
        all.find((r) => r.status === "fulfilled" && r.value.status !== 200)?.value.text.slice(0, 200)
      console.log(
        `${complete}/${streams} complete in ${fmt(seconds, 1)} s, upstream held ${max} at once, peak RSS ${mb(peak)} MB` +
          (failed ? ` (first failure: ${failed})` : "")
      )
      results.push({
        target: target.name,
        before: before.rss,
        peak: Math.max(peak, after.rss),
        complete,
        streams,
        heldAtOnce: max,
        seconds,
        failed
      })
    }
  } finally {
    await callChild(upstream.child, "configure", {})
  }
  return results
}

export const openStreamsTable = (results) =>
  markdown(
    ["target", "RSS before MB", "peak MB", "complete", "open upstream at once", "seconds"],
    results.map((r) => [
      r.target,
      mb(r.before),
      mb(r.peak),
      `${r.complete}/${r.streams}`,
      String(r.heldAtOnce),
      fmt(r.seconds, 1)
    ]),
    [false, true, true, true, true, true]
  )
