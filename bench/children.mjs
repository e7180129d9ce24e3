// The benchmark's child processes: starting them, asking them things over IPC (bench/child.mjs and
// bench/server-child.mjs speak the other side), and stopping them, also when the benchmark fails or is interrupted.
// Shared by bench/run.mjs and bench/growth.mjs.
import { fork } from "node:child_process"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve as resolvePath } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))

/** @type {Set<import("node:child_process").ChildProcess>} */
export const children = new Set()
let shuttingDown = false
let graceMs = 3_000
/** Where the gateway processes' configuration files are written (removed at exit). */
let configDir

/** How long children get to exit at the end (a --cpu-prof profile takes a while to write). */
export const setGrace = (ms) => {
  graceMs = ms
}

/** Forks `file` (relative to bench/ unless absolute) with an IPC channel; resolves once it reports `ready`. */
export const startChild = (name, file, env = {}, execArgv = [], args = []) =>
  new Promise((resolve, reject) => {
    const merged = { ...process.env, ...env }
    for (const key of Object.keys(merged)) if (merged[key] === undefined) delete merged[key]
    const child = fork(resolvePath(here, file), args, {
      env: merged,
      execArgv,
      // Standard output to /dev/null: the gateway logs a line per request, as in production, and its cost counts.
      // BENCH_CHILD_STDOUT=1 lets it through (V8's --trace-gc-nvp writes there).
      stdio: ["ignore", process.env.BENCH_CHILD_STDOUT === "1" ? "inherit" : "ignore", "inherit", "ipc"]
    })
    children.add(child)
    child.benchName = name
    const timer = setTimeout(() => reject(new Error(`${name} did not become ready within 30 s`)), 30_000)
    child.on("message", (message) => {
      if (message?.type === "ready") {
        clearTimeout(timer)
        resolve({ name, child, url: message.url })
      }
    })
    child.on("exit", (code, signal) => {
      children.delete(child)
      clearTimeout(timer)
      if (!shuttingDown && !child.benchStopping) {
        const error = new Error(`${name} exited unexpectedly (code ${code}, signal ${signal})`)
        reject(error)
        fail(error)
      }
    })
  })

let nextId = 0
/** Asks a child something over IPC. */
export const ask = (child, message, timeoutMs = 10_000) =>
  new Promise((resolve, reject) => {
    const id = ++nextId
    const timer = setTimeout(() => {
      child.off("message", onMessage)
      reject(new Error(`${child.benchName} did not answer ${message.type} within ${timeoutMs / 1000} s`))
    }, timeoutMs)
    const onMessage = (reply) => {
      if (reply?.id !== id) return
      clearTimeout(timer)
      child.off("message", onMessage)
      resolve(reply)
    }
    child.on("message", onMessage)
    child.send({ ...message, id })
  })

/**
 * CPU µs so far (user + system, and system alone: the kernel's share), V8 heap in use, resident set size and its peak
 * so far, read inside the child. `window` ("start" or "end") marks a measured run's bounds for the child (see
 * bench/child.mjs).
 */
export const sample = async (child, timeoutMs, window) => {
  const { usage, heap, rss, peakRss } = await ask(child, { type: "cpu", window }, timeoutMs)
  return { cpu: usage.user + usage.system, system: usage.system, heap, rss, peakRss }
}

export const callChild = async (child, name, args) => (await ask(child, { type: "call", name, args })).value

/** Asks one child to exit, then kills it if it has not within `ms`. */
export const stopChild = (child, ms = graceMs) =>
  new Promise((resolve) => {
    child.benchStopping = true
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      resolve()
    }, ms)
    child.once("exit", () => {
      clearTimeout(timer)
      resolve()
    })
    try {
      child.send({ type: "shutdown" })
    } catch {
      child.kill("SIGTERM")
    }
  })

/** Asks every child to exit (so a --cpu-prof profile gets written), then kills what is left. */
export const stopChildren = async (ms = graceMs) => {
  shuttingDown = true
  await Promise.all([...children].map((child) => stopChild(child, ms)))
}

/** What a run leaves outside its children (a PostgreSQL schema): removed when it fails or is interrupted too. */
const leftovers = []
export const onAbort = (cleanup) => leftovers.push(cleanup)
const removeLeftovers = () => Promise.all(leftovers.map((cleanup) => cleanup()))

let failing = false
/** Reports the error, stops every child and exits 1: something is broken. */
export const fail = async (error) => {
  if (failing) return
  failing = true
  console.error(`\nbench failed: ${error?.stack ?? error}`)
  await stopChildren()
  await removeLeftovers()
  process.exit(1)
}

process.on("SIGINT", async () => {
  console.error("\ninterrupted; stopping children")
  await stopChildren()
  await removeLeftovers()
  process.exit(130)
})
process.on("SIGTERM", async () => {
  await stopChildren(3_000)
  await removeLeftovers()
  process.exit(143)
})
process.on("uncaughtException", fail)
process.on("unhandledRejection", fail)
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL")
  if (configDir !== undefined) rmSync(configDir, { recursive: true, force: true })
})

/** A fresh temporary directory, removed at exit (configuration files, SQLite databases). */
export const tempDir = () => {
  configDir ??= mkdtempSync(join(tmpdir(), "model-gateway-bench-"))
  return configDir
}

let configs = 0
/**
 * A gateway process, as `npm start` runs it: `packages/server/dist/bundle/model-gateway.js` of this checkout (or of `root`), its
 * configuration from a file (`config`: see gatewayConfig in bench/fixtures.mjs), and bench/server-child.mjs preloaded
 * to answer the benchmark over IPC. `BENCH_REQUEST_LOG=0`: LOG_LEVEL=warning, which silences the per-request line.
 */
export const startGateway = (name, root, config, execArgv = []) => {
  const file = join(tempDir(), `gateway-${++configs}.config.json`)
  writeFileSync(file, JSON.stringify(config, null, 2))
  // The configuration file alone decides: none of the environment's overrides (PORT, DATABASE_URL, ...) applies.
  const env = {
    GATEWAY_CONFIG: file,
    LOG_FORMAT: "logfmt",
    LOG_LEVEL: process.env.BENCH_REQUEST_LOG === "0" ? "warning" : "info",
    PORT: undefined,
    HOST: undefined,
    DATABASE_URL: undefined,
    GATEWAY_API_KEY: undefined,
    REDIS_URL: undefined
  }
  // The bundled server, as `npm start` runs it; a checkout from before the bundle (2026-11-24): its dist/main.js.
  // BENCH_UNBUNDLED=1 runs dist/main.js (profiles then name the source modules, not the bundle's chunks).
  const bundled = resolvePath(root, "packages/server/dist/bundle/model-gateway.js")
  const main = existsSync(bundled) && process.env.BENCH_UNBUNDLED !== "1"
    ? bundled
    : resolvePath(root, "packages/server/dist/main.js")
  if (!existsSync(main)) throw new Error(`${main} does not exist: build that checkout first (npm run build)`)
  const preload = ["--import", pathToFileURL(join(here, "server-child.mjs")).href]
  return startChild(name, main, env, [...execArgv, ...preload])
}

/** Portkey's process (bench/portkey.mjs installs it), measured like the gateway through bench/server-child.mjs. */
export const startPortkey = (main, execArgv = []) => {
  const preload = ["--import", pathToFileURL(join(here, "server-child.mjs")).href]
  const env = { NODE_ENV: "production", BENCH_LISTEN_LOOPBACK: "1", PORT: undefined }
  return startChild("portkey", main, env, [...execArgv, ...preload], ["--port=0", "--headless"])
}
