// The load runs' report: a table of medians over rounds, then the same-run ratios the issue judges (gateway/proxy,
// gateway/direct, gateway/portkey, and gateway/baseline for an A/B), each with its per-round values (the noise), and
// whether each target of issue 11 is met in this run.
import { fmt, median } from "./load.mjs"

/** One row per (scenario, target): the median over rounds of each column, errors summed. */
export const summarise = (rows) => {
  const keys = [...new Set(rows.map((r) => `${r.scenario}|${r.target}`))]
  return keys.map((key) => {
    const runs = rows.filter((r) => `${r.scenario}|${r.target}` === key)
    return {
      scenario: runs[0].scenario,
      target: runs[0].target,
      rps: median(runs.map((r) => r.rps)),
      rpsRounds: runs.map((r) => r.rps),
      p50: median(runs.map((r) => r.p50)),
      p99: median(runs.map((r) => r.p99)),
      cpuPerRequest: median(runs.map((r) => r.cpuPerRequest)),
      systemPerRequest: median(runs.map((r) => r.systemPerRequest)),
      errors: runs.reduce((n, r) => n + r.errors, 0),
      non2xx: runs.reduce((n, r) => n + r.non2xx, 0)
    }
  })
}

/** A markdown table: `header` names, `lines` of cells, `right` which columns are right-aligned. */
export const markdown = (header, lines, right) => {
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)))
  const cell = (text, i) => (right[i] ? text.padStart(widths[i]) : text.padEnd(widths[i]))
  return [
    `| ${header.map(cell).join(" | ")} |`,
    `|${widths.map((w, i) => (right[i] ? `${"-".repeat(w + 1)}:` : `${"-".repeat(w + 2)}`)).join("|")}|`,
    ...lines.map((l) => `| ${l.map(cell).join(" | ")} |`)
  ].join("\n")
}

export const table = (summary) =>
  markdown(
    ["scenario", "target", "req/s", "req/s by round", "p50 ms", "p99 ms", "CPU µs/req", "of it kernel", "errors/non-2xx"],
    summary.map((r) => [
      r.scenario,
      r.target,
      fmt(r.rps, 0),
      r.rpsRounds.map((v) => fmt(v, 0)).join(", "),
      fmt(r.p50, 2),
      fmt(r.p99, 2),
      fmt(r.cpuPerRequest, 1),
      fmt(r.systemPerRequest, 1),
      `${r.errors}/${r.non2xx}`
    ]),
    [false, false, true, true, true, true, true, true, true]
  )

/** `metric` of `of` over `to` in one scenario, round by round (measured back to back), and the median of those. */
export const ratioOf = (rows, scenario, metric, of, to) => {
  const perRound = []
  for (const a of rows.filter((r) => r.scenario === scenario && r.target === of)) {
    const b = rows.find((r) => r.scenario === scenario && r.target === to && r.round === a.round)
    if (b !== undefined && b[metric] > 0) perRound.push(a[metric] / b[metric])
  }
  return perRound.length === 0 ? undefined : { median: median(perRound), perRound }
}

const showRatio = (ratio) =>
  `${fmt(ratio.median, 2)}x` + (ratio.perRound.length > 1 ? ` (${ratio.perRound.map((r) => fmt(r, 2)).join(", ")})` : "")

/** The ratio lines, scenario by scenario, and the issue's targets judged on this run's ratios. */
export const ratioReport = (rows, scenarios, hasBaseline) => {
  const lines = []
  const verdicts = []
  const judge = (what, ratio, ok, limit) => {
    if (ratio === undefined) return
    const met = ok(ratio.median)
    verdicts.push({ met, text: `${met ? "MET   " : "MISSED"} ${what}: ${showRatio(ratio)} (target ${limit})` })
  }
  for (const s of scenarios) {
    const name = s.name
    const parts = []
    const r = (metric, of, to) => ratioOf(rows, name, metric, of, to)
    const toProxy = r("rps", "gateway", "proxy")
    const cpu = r("cpuPerRequest", "gateway", "proxy")
    const toDirect = r("rps", "gateway", "direct")
    const toPortkey = r("rps", "gateway", "portkey")
    if (toProxy) parts.push(`gateway/proxy req/s ${showRatio(toProxy)}`)
    if (cpu) parts.push(`gateway/proxy CPU per request ${showRatio(cpu)}`)
    if (toDirect) parts.push(`gateway/direct req/s ${showRatio(toDirect)}`)
    if (toPortkey) parts.push(`gateway/portkey req/s ${showRatio(toPortkey)}`)
    const undiciToProxy = r("cpuPerRequest", "proxy-undici", "proxy")
    if (undiciToProxy) parts.push(`proxy-undici/proxy CPU per request ${showRatio(undiciToProxy)}`)
    if (hasBaseline) {
      const ab = r("cpuPerRequest", "gateway", "baseline")
      const abRps = r("rps", "gateway", "baseline")
      if (ab) parts.push(`gateway/baseline CPU per request ${showRatio(ab)}`)
      if (abRps) parts.push(`gateway/baseline req/s ${showRatio(abRps)}`)
    }
    if (parts.length > 0) lines.push(`  ${name}:\n    ${parts.join("\n    ")}`)
    // The targets are judged on the fixture's one-line request, not on a coding session's (BENCH_BODY_KB).
    if (s.bodyKb > 0) continue
    if (s.latencyMs === 0 && !s.stream) {
      judge(`${name} gateway/proxy throughput`, toProxy, (v) => v >= 0.5, ">= 0.5x")
      judge(`${name} gateway/proxy CPU per request`, cpu, (v) => v <= 2, "<= 2x")
      judge(`${name} gateway/portkey throughput`, toPortkey, (v) => v >= 5, ">= 5x")
    } else if (s.latencyMs === 0 && s.stream) {
      judge(`${name} gateway/proxy throughput`, toProxy, (v) => v >= 0.8, ">= 0.8x")
      judge(`${name} gateway/portkey throughput`, toPortkey, (v) => v >= 3, ">= 3x")
    } else if (s.latencyMs === 50 && s.connections === 256) {
      judge(`${name} gateway/direct throughput`, toDirect, (v) => v >= 0.9, ">= 0.9x, within 10%")
    }
  }
  return { lines, verdicts }
}
