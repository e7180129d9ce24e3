/**
 * A configuration reload (`SIGHUP` to the process, or `Gateway.reload` from code): what a running gateway takes from
 * a new configuration without a restart, and what it cannot.
 *
 * Taken: the models (endpoints, pricing, limits, `maxTokensPolicy`), the keys and the HTTP providers (Anthropic and
 * OpenAI-compatible: a rotated upstream key, another URL, headers, time limits, a new provider). Requests that start
 * afterwards read the new catalogue and go to the new providers' adapters (new connection pools); those under way,
 * streams included, finish with the catalogue and the adapter they started with (a request reads one catalogue
 * snapshot from start to end; a replaced adapter is retired: its idle connections close at once, the others once
 * their call is over, and nothing of it is left after its last call). Keys are synced as at start: new ones work at
 * once, removed ones stop.
 *
 * Not taken: what else is built into the running process (server, storage, the local speech engine's workers, the
 * limits' store, workspaces, plugins, interns, batches). A new configuration that changes any of it is refused whole,
 * naming what changed, and the running one stays: an operator who edits a file expects the file to be what runs, not
 * half of it. A provider the new configuration no longer has is not a change (no model reaches it any more).
 */
import { Catalogue, type Keys } from "@model-gateway/core"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { catalogueModels, type GatewayConfig } from "./Config.js"

/** The configuration's top-level keys a reload takes (`providers` apart: see `needsRestart`). */
const TAKEN: ReadonlySet<string> = new Set(["models", "keys", "maxTokensPolicy"])

/** The provider kinds a reload rebuilds: a connection pool each, nothing else held. */
const REBUILT: ReadonlySet<string> = new Set(["anthropic", "openai"])

/** A new configuration that changes what needs a restart: nothing of it was taken. */
export class ReloadRefused extends Data.TaggedError("ReloadRefused")<{ readonly changed: ReadonlyArray<string> }> {
  override get message(): string {
    return `configuration not reloaded: ${this.changed.join(", ")} changed (a reload takes models, keys and HTTP ` +
      "providers; restart to apply the rest)"
  }
}

/** What a reload did. */
export interface Reloaded {
  /** Models in the catalogue now. */
  readonly models: number
  readonly keys: Keys.SyncResult
  /** The providers whose adapters were built anew (changed or added). */
  readonly providers: ReadonlyArray<string>
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
    for (const name of changedProviders(running, next)) {
      const before = running.providers[name]
      const rebuilt = REBUILT.has(next.providers[name]!.kind) && (before === undefined || REBUILT.has(before.kind))
      if (!rebuilt) changed.push(`providers.${name}`)
    }
  }
  return changed
}

/** The providers of `next` whose configuration differs from the running one's, or that it adds. */
export const changedProviders = (running: GatewayConfig, next: GatewayConfig): Array<string> =>
  Object.keys(next.providers).filter((name) => canonical(running.providers[name]) !== canonical(next.providers[name]))

/** What a reload changes in the running gateway, each given the new configuration. */
export interface Targets {
  readonly catalogue: Catalogue.Replaceable
  /** Makes the stored configuration keys the configuration's. */
  readonly syncKeys: (config: GatewayConfig) => Effect.Effect<Keys.SyncResult>
  /** Builds the adapters of these providers anew, in place of the running ones; the names of those it rebuilt. */
  readonly rebuildProviders: (
    config: GatewayConfig,
    names: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string>>
}

/**
 * The reload of a running gateway whose configuration was `initial`. One reload at a time: the next waits for the one
 * under way.
 */
export const make = (
  initial: GatewayConfig,
  targets: Targets
): (next: GatewayConfig) => Effect.Effect<Reloaded, ReloadRefused> => {
  let running = initial
  const one = Effect.unsafeMakeSemaphore(1)
  return (next) =>
    one.withPermits(1)(Effect.suspend(() => {
      const changed = needsRestart(running, next)
      if (changed.length > 0) return Effect.fail(new ReloadRefused({ changed }))
      const providers = changedProviders(running, next)
      // Keys first (a sync that fails, storage, leaves the rest as it was, and the reload can be sent again), then the
      // providers, then the catalogue: no request is routed to a provider whose new adapter is not in place yet.
      return Effect.flatMap(targets.syncKeys(next), (keys) =>
        Effect.flatMap(targets.rebuildProviders(next, providers), (rebuilt) =>
          Effect.map(targets.catalogue.catalogue.snapshot, (offered): Reloaded => {
            // A model offered already keeps its `created`; a new one is offered from now.
            const snapshot = Catalogue.makeSnapshot(catalogueModels(next, Math.floor(Date.now() / 1000), offered))
            targets.catalogue.replace(snapshot)
            running = next
            return { models: snapshot.models.size, keys, providers: rebuilt }
          })))
    }))
}
