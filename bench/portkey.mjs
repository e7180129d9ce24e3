// The Portkey target: `@portkey-ai/gateway` 1.15.2, installed by the bench into bench/.portkey (git-ignored, kept
// between runs), never a dependency of the project. Its fresh install needs `@hono/node-server` 1.13.5 and `hono`
// 4.9.7 pinned (overrides), or its streaming breaks. Installed with --ignore-scripts: its only script is a
// `patch-package` postinstall whose patches are not in the published package.
//
// It runs as `node build/start-server.js --port=0 --headless` with bench/server-child.mjs preloaded (the same IPC as the
// gateway: CPU, memory, ready with its address), NODE_ENV=production, bound to 127.0.0.1. It has no configuration:
// each request names its upstream in headers (`x-portkey-provider`, `x-portkey-custom-host`) and carries the
// provider's key itself (see bench/requests.mjs).
import { execFile } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
export const PORTKEY_DIR = join(here, ".portkey")
export const PORTKEY_VERSION = "1.15.2"
const PINS = { "@hono/node-server": "1.13.5", hono: "4.9.7" }
const MANIFEST = {
  name: "model-gateway-bench-portkey",
  private: true,
  description: "Installed by bench/portkey.mjs; not part of the project.",
  dependencies: { "@portkey-ai/gateway": PORTKEY_VERSION, ...PINS },
  overrides: PINS
}
export const PORTKEY_MAIN = join(PORTKEY_DIR, "node_modules/@portkey-ai/gateway/build/start-server.js")

const installedVersion = (name) => {
  try {
    return JSON.parse(readFileSync(join(PORTKEY_DIR, "node_modules", name, "package.json"), "utf8")).version
  } catch {
    return undefined
  }
}

/** Whether bench/.portkey holds exactly the pinned versions. */
const installed = () =>
  existsSync(PORTKEY_MAIN) && installedVersion("@portkey-ai/gateway") === PORTKEY_VERSION &&
  Object.entries(PINS).every(([name, version]) => installedVersion(name) === version)

/**
 * Makes sure Portkey is installed; resolves with the path of its start script, or with `{ error }` saying why it
 * cannot be (no registry, ...). Never throws: the bench goes on without Portkey.
 */
export const ensurePortkey = async (log = console.log) => {
  if (installed()) return { main: PORTKEY_MAIN }
  log(`  installing @portkey-ai/gateway@${PORTKEY_VERSION} (hono ${PINS.hono}, @hono/node-server ${PINS["@hono/node-server"]}) into bench/.portkey ...`)
  try {
    mkdirSync(PORTKEY_DIR, { recursive: true })
    writeFileSync(join(PORTKEY_DIR, "package.json"), `${JSON.stringify(MANIFEST, null, 2)}\n`)
    const npm = process.platform === "win32" ? "npm.cmd" : "npm"
    await new Promise((resolve, reject) => {
      execFile(
        npm,
        ["install", "--prefix", PORTKEY_DIR, "--ignore-scripts", "--no-audit", "--no-fund", "--no-save", "--loglevel=error"],
        { cwd: PORTKEY_DIR, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 },
        (error, _stdout, stderr) => {
          if (error) {
            const noise = /Unknown user config|complete log of this run|behind a proxy|^npm error\s*$/
            const lines = String(stderr).split("\n").map((l) => l.trim()).filter((l) => l !== "" && !noise.test(l))
            reject(new Error(lines.slice(0, 3).join(" | ") || error.message))
          } else resolve()
        }
      )
    })
  } catch (error) {
    return { error: `npm install failed: ${error.message}` }
  }
  if (!installed()) return { error: "npm install finished but the pinned versions are not what bench/.portkey holds" }
  return { main: PORTKEY_MAIN }
}
