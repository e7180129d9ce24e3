// Where a V8 profile's call frame is: its source position (through the source maps next to compiled dist/*.js), and
// its area (gateway package, a dependency, node internals, GC). Shared by bench/profile-top.mjs (CPU profiles) and
// bench/alloc-top.mjs (sampling heap profiles).
import { readFileSync } from "node:fs"
import { SourceMap } from "node:module"
import { dirname, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")

const maps = new Map()
const mapFor = (path) => {
  if (maps.has(path)) return maps.get(path)
  let map
  try {
    const payload = JSON.parse(readFileSync(`${path}.map`, "utf8"))
    map = { map: new SourceMap(payload), dir: dirname(path) }
  } catch {
    map = undefined
  }
  maps.set(path, map)
  return map
}

/** `src/…/File.ts:line` for a dist position (0-based line and column), or the dist position itself. */
export const locate = (url, line, column) => {
  if (!url) return ""
  if (!url.startsWith("file://")) return `${url}:${line + 1}`
  const path = fileURLToPath(url)
  const shown = (p, l) => `${relative(root, p)}:${l}`
  if (path.includes("/node_modules/") || !path.endsWith(".js")) return shown(path, line + 1)
  const m = mapFor(path)
  const entry = m?.map.findEntry(line, Math.max(0, column))
  if (entry?.originalSource === undefined) return shown(path, line + 1)
  const source = entry.originalSource.startsWith("file://")
    ? fileURLToPath(entry.originalSource)
    : resolve(m.dir, entry.originalSource)
  return shown(source, entry.originalLine + 1)
}

export const areaOf = (frame) => {
  const { url, functionName } = frame
  if (url === "") {
    if (functionName === "(garbage collector)") return "GC"
    if (functionName === "(idle)") return "idle"
    if (functionName === "(program)") return "(program): V8/native, unattributed"
    return "native/builtins"
  }
  if (url.startsWith("node:")) return "node internals"
  const path = url.startsWith("file://") ? fileURLToPath(url) : url
  const nm = path.lastIndexOf("/node_modules/")
  if (nm !== -1) {
    const rest = path.slice(nm + "/node_modules/".length).split("/")
    return rest[0].startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]
  }
  const inRepo = relative(root, path)
  const match = /^(packages|examples)\/([^/]+)\//.exec(inRepo)
  return match ? `gateway: ${match[1]}/${match[2]}` : inRepo
}

export const isGatewayCode = (frame) => areaOf(frame).startsWith("gateway:")

export const keyOf = (frame) => `${frame.functionName || "(anonymous)"}\u0000${frame.url}\u0000${frame.lineNumber}`
export const describe = (frame) =>
  `${frame.functionName || "(anonymous)"}  ${locate(frame.url, frame.lineNumber, frame.columnNumber)}`

