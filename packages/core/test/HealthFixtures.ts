/** Endpoint health for the planner's tests: nothing measured yet, and a snapshot of the endpoints a test names. */
import type { EndpointHealth, HealthSnapshot } from "../src/health/EndpointStats.js"

/** An endpoint's health before anything was measured: healthy, no figures. */
export const known: EndpointHealth = {
  latency30m: null,
  throughput30m: null,
  uptime5m: null,
  uptime30m: null,
  uptime1d: null,
  recentOutage: false,
  coolingDownUntil: null,
  halfOpen: false
}

/** A snapshot with `entries` (each over `known`); the other endpoints unknown. */
export const healthOf = (entries: Record<string, Partial<EndpointHealth>>): HealthSnapshot => ({
  get: (id) => (entries[id] === undefined ? undefined : { ...known, ...entries[id] })
})
