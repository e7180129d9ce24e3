/**
 * A configuration reload (`SIGHUP` to the process, or `Gateway.reload` from code): what a running gateway takes from
 * a new configuration without a restart, and what it cannot.
 *
 * Taken: the models (endpoints, pricing, limits, `maxTokensPolicy`) and the keys. Requests that start afterwards read
 * the new catalogue; those under way, streams included, finish with the one they started with (a request reads one
 * catalogue snapshot from start to end). Keys are synced as at start: new ones work at once, removed ones stop.
 *
 * Not taken: everything built into the running process (server, storage, providers and their connection pools, the
 * limits' store, workspaces, plugins, interns, batches). A new configuration that changes any of it is refused whole,
 * naming what changed, and the running one stays: an operator who edits a file expects the file to be what runs, not
 * half of it. A provider the new configuration no longer has is not a change (no model reaches it any more).
 */
import { Catalogue, type Keys } from "@model-gateway/core"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { catalogueModels, type GatewayConfig } from "./Config.js"

/** The configuration's top-level keys a reload takes. */
const TAKEN: ReadonlySet<string> = new Set(["models", "keys", "maxTokensPolicy"])

/** A new configuration that changes what needs a restart: nothing of it was taken. */
export class ReloadRefused extends Data.TaggedError("ReloadRefused")<{ readonly changed: ReadonlyArray<string> }> {
  override get message(): string {
    return `configuration not reloaded: ${this.changed.join(", ")} changed (a reload takes models and keys; ` +
      "restart to apply the rest)"
  }
}

/** What a reload did. */
export interface Reloaded {
  /** Models in the catalogue now. */
  readonly models: number
  readonly keys: Keys.SyncResult
}

const sortedKeys = (_: string, value: unknown): unknown =>
  value !== null && typeof value === "object" && !Array.isArray(value)
    ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    : value

/** A JSON text of `value` with its objects' keys sorted: the same for two equal configurations in any key order. */
const canonical = (value: unknown): string | undefined => JSON.stringify(value, sortedKeys)

const section = (config: GatewayConfig, key: string): unknown => (config as Readonly<Record<string, unknown>>)[key]

/** What `next` changes that a reload cannot take (`server`, `providers.acme`, ...); empty when it can be taken. */
export const needsRestart = (running: GatewayConfig, next: GatewayConfig): Array<string> => {
  const changed: Array<string> = []
  for (const key of new Set([...Object.keys(running), ...Object.keys(next)])) {
    if (TAKEN.has(key)) continue
    if (key !== "providers") {
      if (canonical(section(running, key)) !== canonical(section(next, key))) changed.push(key)
      continue
    }
    for (const [name, provider] of Object.entries(next.providers)) {
      if (canonical(running.providers[name]) !== canonical(provider)) changed.push(`providers.${name}`)
    }
  }
  return changed
}

/**
 * The reload of a running gateway whose catalogue is `catalogue` and whose configuration was `initial`; `syncKeys`
 * makes the stored configuration keys a configuration's. One reload at a time: the next waits for the one under way.
 */
export const make = (
  initial: GatewayConfig,
  catalogue: Catalogue.Replaceable,
  syncKeys: (config: GatewayConfig) => Effect.Effect<Keys.SyncResult>
): (next: GatewayConfig) => Effect.Effect<Reloaded, ReloadRefused> => {
  let running = initial
  const one = Effect.unsafeMakeSemaphore(1)
  return (next) =>
    one.withPermits(1)(Effect.suspend(() => {
      const changed = needsRestart(running, next)
      if (changed.length > 0) return Effect.fail(new ReloadRefused({ changed }))
      const snapshot = Catalogue.makeSnapshot(catalogueModels(next))
      // Keys first: a sync that fails (storage) leaves the catalogue as it was, and the reload can be sent again.
      return Effect.map(syncKeys(next), (keys): Reloaded => {
        catalogue.replace(snapshot)
        running = next
        return { models: snapshot.models.size, keys }
      })
    }))
}
