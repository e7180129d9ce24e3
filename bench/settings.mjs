// bench/run.mjs's settings, from the environment (docs/benchmarks.md has the table). A bad value exits 2.
import { STORAGES } from "./storage.mjs"

const die = (message) => {
  console.error(message)
  process.exit(2)
}

const numberFromEnv = (name, fallback, { allowZero = false } = {}) => {
  const raw = process.env[name]
  if (raw === undefined || raw === "") return fallback
  const n = Number(raw)
  if (!Number.isFinite(n) || n < 0 || (n === 0 && !allowZero)) die(`${name} must be a positive number, got ${JSON.stringify(raw)}`)
  return n
}

const listFromEnv = (name, fallback) =>
  (process.env[name] ?? fallback).split(",").map((s) => s.trim()).filter(Boolean)

const numbersFromEnv = (name, fallback, allowZero) =>
  listFromEnv(name, fallback).map((raw) => {
    const n = Number(raw)
    if (!Number.isFinite(n) || n < 0 || (n === 0 && !allowZero)) die(`${name}: ${JSON.stringify(raw)} is not a number`)
    return n
  })

export const DURATION = numberFromEnv("BENCH_DURATION", 5)
export const WARMUP = numberFromEnv("BENCH_WARMUP", 3)
export const ROUNDS = Math.round(numberFromEnv("BENCH_ROUNDS", 2))
export const CONNECTIONS = numbersFromEnv("BENCH_CONNECTIONS", "32,256", false).map(Math.round)
export const LATENCIES = numbersFromEnv("BENCH_LATENCY", "0,50", true)

const LOAD = ["anthropic-json", "anthropic-stream", "openai-json", "openai-stream"]
const PROBES = ["sequential", "interchunk", "memory", "streams"]
const ALIASES = {
  json: ["anthropic-json"],
  stream: ["anthropic-stream"],
  load: LOAD,
  probes: PROBES,
  all: [...LOAD, ...PROBES]
}
const KNOWN = new Set([...LOAD, ...PROBES, "batches"])
const requested = listFromEnv("BENCH_SCENARIOS", "all").flatMap((s) => ALIASES[s] ?? [s])
for (const s of requested) {
  if (!KNOWN.has(s)) {
    die(`BENCH_SCENARIOS: unknown scenario ${JSON.stringify(s)} (use ${[...KNOWN].join(", ")}, or json, stream, load, probes, all)`)
  }
}
/** Everything asked for, in a fixed order. */
export const SCENARIOS = [...KNOWN].filter((s) => requested.includes(s))
export const BATCHES = SCENARIOS.includes("batches")
export const has = (probe) => SCENARIOS.includes(probe)

/** The load scenarios' requests: 0, the fixture's one-line message; else a coding agent's session of about this many KB. */
export const BODY_KB = Math.round(numberFromEnv("BENCH_BODY_KB", 0, { allowZero: true }))

/**
 * The gateway's front door: \`messages\` (the default: Anthropic's \`POST /v1/messages\`, where the targets are judged) or
 * \`chat\` (OpenAI's \`POST /v1/chat/completions\` with the OpenAI body: passed through to the OpenAI-compatible upstream,
 * translated for the Anthropic one; measured, not judged).
 */
export const GATEWAY_API = process.env.BENCH_GATEWAY_API ?? "messages"
if (!["messages", "chat"].includes(GATEWAY_API)) die(`BENCH_GATEWAY_API: use messages or chat, not ${JSON.stringify(GATEWAY_API)}`)

/** The load scenarios: provider x streamed or not x latency x connections, in the order they run. */
export const LOAD_SCENARIOS = LOAD.filter((s) => SCENARIOS.includes(s)).flatMap((s) => {
  const [provider, kind] = s.split("-")
  return LATENCIES.flatMap((latencyMs) =>
    CONNECTIONS.map((connections) => ({ provider, stream: kind === "stream", connections, latencyMs, bodyKb: BODY_KB }))
  )
})

const TARGETS_KNOWN = ["direct", "proxy", "proxy-undici", "gateway", "portkey"]
export const TARGETS = listFromEnv("BENCH_TARGETS", "direct,proxy,gateway,portkey")
for (const t of TARGETS) if (!TARGETS_KNOWN.includes(t)) die(`BENCH_TARGETS: unknown target ${JSON.stringify(t)} (use ${TARGETS_KNOWN.join(", ")})`)
for (const t of ["direct", "gateway"]) if (!TARGETS.includes(t)) die(`BENCH_TARGETS must include ${t}`)

/** The gateway's (and the baseline's) storage: memory, sqlite or postgres (see bench/storage.mjs). */
export const STORAGE = process.env.BENCH_STORAGE || "memory"
if (!STORAGES.includes(STORAGE)) die(`BENCH_STORAGE: unknown storage ${JSON.stringify(STORAGE)} (use ${STORAGES.join(", ")})`)

/** Another checkout, built, whose gateway runs as a target "baseline": an A/B of two builds in one run. */
export const BASELINE = process.env.BENCH_BASELINE || undefined

/** Which upstream protocols the probes use (the sequential and inter-chunk probes run each; memory: the first). */
export const PROBE_PROVIDERS = listFromEnv("BENCH_PROBE_PROVIDERS", "anthropic,openai")
for (const p of PROBE_PROVIDERS) if (p !== "anthropic" && p !== "openai") die(`BENCH_PROBE_PROVIDERS: unknown ${JSON.stringify(p)}`)
export const SEQUENTIAL = Math.round(numberFromEnv("BENCH_SEQUENTIAL", 500))
export const SEQUENTIAL_WARMUP = Math.round(numberFromEnv("BENCH_SEQUENTIAL_WARMUP", 2000, { allowZero: true }))
export const INTERCHUNK = {
  streams: Math.round(numberFromEnv("BENCH_INTERCHUNK_STREAMS", 32)),
  deltas: Math.round(numberFromEnv("BENCH_INTERCHUNK_DELTAS", 64)),
  intervalMs: numberFromEnv("BENCH_INTERCHUNK_INTERVAL", 20),
  rounds: ROUNDS
}
export const MEMORY_SECONDS = numberFromEnv("BENCH_MEMORY_SECONDS", 60)
export const OPEN_STREAMS = Math.round(numberFromEnv("BENCH_STREAMS", 1000))
/** The open-streams probe's request: 0, the fixture's one-line message; else a conversation of about this many KB. */
export const STREAM_BODY_KB = Math.round(numberFromEnv("BENCH_STREAM_BODY_KB", 0, { allowZero: true }))

// BENCH_CPU_PROF=1 profiles the gateway; a list ("proxy,gateway") names the children to profile.
export const PROFILED = new Set(
  process.env.BENCH_CPU_PROF === "1"
    ? ["gateway"]
    : listFromEnv("BENCH_CPU_PROF", "").filter((s) => s !== "0")
)
/** Node options for a child, from an environment variable (space-separated). */
export const nodeArgs = (name) => (process.env[name] ?? "").split(" ").filter(Boolean)
