/**
 * The progress line `model-gateway batches submit` shows while it polls: a bar, the requests done and failed, the
 * rate, and an estimate of the time left (from the rate so far).
 */

export interface Progress {
  readonly status: string
  readonly total: number
  readonly completed: number
  readonly failed: number
  /** Since the batch was submitted. */
  readonly elapsedMs: number
}

const WIDTH = 24

/** `1m05s`, `42s`, `1h02m`. */
export const duration = (ms: number): string => {
  const s = Math.max(0, Math.round(ms / 1000))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`
}

/** `[#########...............] 120/320 done, 3 failed · 40/s · about 5s left · in_progress` */
export const line = (p: Progress): string => {
  const finished = p.completed + p.failed
  const filled = p.total === 0 ? WIDTH : Math.min(WIDTH, Math.floor((finished / p.total) * WIDTH))
  const bar = `[${"#".repeat(filled)}${".".repeat(WIDTH - filled)}]`
  const rate = p.elapsedMs > 0 ? finished / (p.elapsedMs / 1000) : 0
  const left = p.total - finished
  const estimate = left === 0
    ? "done"
    : rate === 0
    ? "estimating"
    : `about ${duration((left / rate) * 1000)} left`
  const shownRate = rate >= 10 ? Math.round(rate).toString() : rate.toFixed(1)
  return `${bar} ${finished}/${p.total} done, ${p.failed} failed · ${shownRate}/s · ${estimate} · ${p.status}`
}
