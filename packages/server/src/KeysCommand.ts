/**
 * `model-gateway keys create|list|revoke`: API keys kept until revoked, in the storage the configuration (or
 * `DATABASE_URL`) names. A new key is printed once; only its digest is stored. Configuration keys are listed too
 * (source `config`), but they are managed by the configuration: the next start re-syncs them.
 */
import type { FileSystem } from "@effect/platform"
import { Keys } from "@model-gateway/core"
import { ApiKeys } from "@model-gateway/http-adapter"
import { Console, Effect, Layer, Option } from "effect"
import type { ConfigError } from "./Config.js"
import * as ConfigLoader from "./ConfigLoader.js"
import * as Gateway from "./Gateway.js"
import type { StorageError } from "./StartupErrors.js"

/** The key store of the configured storage, opened for one command. */
const withKeys = <A, E>(
  f: (keys: Keys.KeysService) => Effect.Effect<A, E>
): Effect.Effect<A, E | ConfigError | StorageError, FileSystem.FileSystem> =>
  Effect.flatMap(ConfigLoader.resolve, ({ config }) =>
    Effect.flatMap(Keys.Keys, f).pipe(
      Effect.provide(Layer.project(Gateway.storageLayer(config.storage), Keys.Keys, Keys.Keys, (keys) => keys))
    ))

export interface CreateOptions {
  readonly workspace: string
  readonly management: boolean
  readonly interns: boolean
  readonly label: Option.Option<string>
}

/** Makes a key and prints it once. */
export const create = (options: CreateOptions) =>
  withKeys((keys) => {
    const secret = ApiKeys.generate()
    return Effect.flatMap(
      keys.provision({
        digest: ApiKeys.digest(secret),
        workspace: options.workspace,
        management: options.management,
        interns: options.interns,
        label: Option.getOrUndefined(options.label),
        source: "cli"
      }),
      (principal) =>
        Console.log(
          `created key ${principal.keyId} in workspace ${principal.workspace}${
            principal.management ? " (management)" : ""
          }; it is shown only now:\n${secret}`
        )
    )
  })

const pad = (rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)))
  return rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd()).join("\n")
}

/** Lists every key (never a secret or digest). */
export const list = (options: { readonly json: boolean }) =>
  withKeys((keys) =>
    Effect.flatMap(keys.list, (all) => {
      if (options.json) return Console.log(JSON.stringify(all, null, 2))
      if (all.length === 0) return Console.log("no keys")
      return Console.log(pad([
        ["ID", "WORKSPACE", "MANAGEMENT", "INTERNS", "SOURCE", "CREATED", "LABEL"],
        ...all.map((k) => [
          k.keyId,
          k.workspace,
          k.management ? "yes" : "no",
          k.interns ? "yes" : "no",
          k.source,
          new Date(k.createdAt).toISOString(),
          k.label ?? ""
        ])
      ]))
    })
  )

/** The key id was not found. */
export class UnknownKey extends Error {
  override readonly name = "UnknownKey"
}

/** Revokes a key by its id. */
export const revoke = (keyId: string) =>
  withKeys((keys) =>
    Effect.flatMap(keys.list, (all) => {
      const key = all.find((k) => k.keyId === keyId)
      if (key === undefined) {
        return Effect.fail(new UnknownKey(`no key with id ${keyId} (see: model-gateway keys list)`))
      }
      return Effect.zipRight(
        keys.revoke(keyId),
        Console.log(
          `revoked key ${keyId}${
            key.source === "config"
              ? " (a configuration key: remove it from the configuration, or it returns at the next start)"
              : ""
          }`
        )
      )
    })
  )
