// The `model-gateway` process as it ships: the compiled server (`dist/`, from `tsc -b`) bundled by esbuild into
// `dist/bundle/`, minified, with code-splitting so that what a process does not use is never loaded (the SQL storage
// and its drivers, the batches and keys commands, the token counter's tables, the JSON Schema compiler each sit in a
// chunk of their own, imported when first needed).
//
// Why: loading the same code as ~800 separate modules from node_modules held some 40 MB more memory than one bundle
// (module records, unminified sources, the barrels' unused modules); see docs/benchmarks.md, "Memory".
//
// Entry points: the command (`model-gateway.js`) and the intern daemon (`InternDaemonMain.js`, started as a child
// process from a path next to the code that starts it). The worker threads' files (the eSpeak NG worker, the SQLite
// usage writer) are copied as they are: plain JavaScript, loaded by path next to the code that starts them, each
// loading its own dependencies.
// Left to node_modules: native and data-carrying packages, loaded only when configured (better-sqlite3, pg, ioredis,
// espeak-ng and lamejs, unpdf).
/* global console, process */
import { build } from "esbuild"
import { copyFileSync, existsSync, readdirSync, renameSync, rmSync, statSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const packages = join(root, "..")
const out = join(root, "dist", "bundle")
const entry = join(out, "model-gateway.js")
const started = Date.now()

/** The newest modification time among the compiled packages (their dist/, this bundle aside) and the lock file. */
const newestInput = () => {
  let newest = statSync(join(packages, "..", "package-lock.json")).mtimeMs
  const walk = (dir) => {
    for (const item of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, item.name)
      if (item.isDirectory()) {
        if (path !== out) walk(path)
      } else if (/\.m?js$/.test(item.name)) {
        newest = Math.max(newest, statSync(path).mtimeMs)
      }
    }
  }
  for (const name of readdirSync(packages)) {
    const dist = join(packages, name, "dist")
    if (existsSync(dist)) walk(dist)
  }
  return newest
}

// Like `tsc -b`, nothing to do when nothing changed: running processes keep loading their chunks from here.
if (existsSync(entry) && statSync(entry).mtimeMs >= newestInput() && process.env.BUNDLE_FORCE !== "1") {
  process.exit(0)
}

// Built aside, then swapped in, so that a process starting meanwhile finds either bundle whole.
const next = `${out}.next`
rmSync(next, { recursive: true, force: true })
await build({
  entryPoints: [
    { in: join(root, "dist", "main.js"), out: "model-gateway" },
    { in: join(root, "dist", "interns", "InternDaemonMain.js"), out: "InternDaemonMain" }
  ],
  outdir: next,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  minify: true,
  // Stack traces and `--enable-source-maps` map back to dist/*.js, and from there to src/*.ts.
  sourcemap: "linked",
  // Bundled CommonJS packages call `require` for Node's built-ins.
  banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
  external: ["better-sqlite3", "pg", "pg-native", "ioredis", "espeak-ng", "@breezystack/lamejs", "unpdf"],
  logLevel: "warning",
  legalComments: "linked"
})
// Worker threads' entry files, found beside the chunk that starts them (`new URL(..., import.meta.url)`).
copyFileSync(join(packages, "provider-adapters", "dist", "speech", "EspeakWorker.mjs"), join(next, "EspeakWorker.mjs"))
copyFileSync(join(packages, "storage-sql", "dist", "SqliteUsageWorker.mjs"), join(next, "SqliteUsageWorker.mjs"))
const old = `${out}.old`
rmSync(old, { recursive: true, force: true })
if (existsSync(out)) renameSync(out, old)
renameSync(next, out)
rmSync(old, { recursive: true, force: true })
console.log(`bundled the server into ${out} in ${Date.now() - started} ms`)
