/**
 * `model-gateway keys create|list|revoke`: API keys kept until revoked, in the storage the configuration (or
 * `DATABASE_URL`) names. A new key is printed once; only its digest is stored. Configuration keys are listed too
 * (source `config`), but they are managed by the configuration: the next start re-syncs them.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import { Keys, Limits } from "@model-gateway/core"
import { ApiKeys } from "@model-gateway/http-adapter"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
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
  readonly requestsPerMinute?: Option.Option<number> | undefined
  readonly inputTokensPerMinute?: Option.Option<number> | undefined
  readonly outputTokensPerMinute?: Option.Option<number> | undefined
  readonly budgetUsd?: Option.Option<string> | undefined
  readonly budgetPeriod?: Option.Option<string> | undefined
}

/** A flag's value was not usable (a limit that is not a positive whole number, a budget that is not an amount). */
export class BadOption extends Error {
  override readonly name = "BadOption"
}

/** The limits the options give, checked; undefined when they limit nothing. */
export const limitsOf = (options: CreateOptions): Limits.Limits | undefined => {
  const count = (flag: string, value: Option.Option<number> | undefined): number | undefined => {
    const n = value === undefined ? undefined : Option.getOrUndefined(value)
    if (n !== undefined && !(Number.isSafeInteger(n) && n > 0)) {
      throw new BadOption(`--${flag} must be a whole number above 0 (got ${n})`)
    }
    return n
  }
  const usd = options.budgetUsd === undefined ? undefined : Option.getOrUndefined(options.budgetUsd)
  const nanoUsd = usd === undefined ? undefined : Limits.nanoUsdOf(usd)
  if (usd !== undefined && nanoUsd === undefined) {
    throw new BadOption(`--budget-usd must be an amount of USD such as 25 or 0.50 (got ${usd})`)
  }
  const period = options.budgetPeriod === undefined ? undefined : Option.getOrUndefined(options.budgetPeriod)
  if (period !== undefined && !(Limits.budgetPeriods as ReadonlyArray<string>).includes(period)) {
    throw new BadOption(`--budget-period must be one of ${Limits.budgetPeriods.join(", ")} (got ${period})`)
  }
  // A period alone would make a key without a budget, and say nothing: refused, as a budget that is not an amount is.
  if (period !== undefined && usd === undefined) throw new BadOption("--budget-period needs --budget-usd")
  const limits: Limits.Limits = {
    requestsPerMinute: count("requests-per-minute", options.requestsPerMinute),
    inputTokensPerMinute: count("input-tokens-per-minute", options.inputTokensPerMinute),
    outputTokensPerMinute: count("output-tokens-per-minute", options.outputTokensPerMinute),
    budget: nanoUsd === undefined ? undefined : { nanoUsd, period: (period ?? "month") as Limits.BudgetPeriod }
  }
  return Limits.isUnlimited(limits) ? undefined : limits
}

/** Limits in a few words: `60 req/min, 40000 out/min, $25/day`. */
export const describeLimits = (limits: Limits.Limits | undefined): string => {
  if (limits === undefined) return ""
  const parts: Array<string> = []
  if (limits.requestsPerMinute !== undefined) parts.push(`${limits.requestsPerMinute} req/min`)
  if (limits.inputTokensPerMinute !== undefined) parts.push(`${limits.inputTokensPerMinute} in/min`)
  if (limits.outputTokensPerMinute !== undefined) parts.push(`${limits.outputTokensPerMinute} out/min`)
  if (limits.budget !== undefined) parts.push(`$${Limits.usdOf(limits.budget.nanoUsd)}/${limits.budget.period}`)
  return parts.join(", ")
}

/** Makes a key and prints it once. */
export const create = (options: CreateOptions) =>
  Effect.flatMap(
    Effect.try({
      try: () => {
        // An unset shell variable (`--workspace "$TEAM"`) would make a key of a workspace named by nothing.
        if (options.workspace.trim() === "") throw new BadOption(`--workspace must name a workspace (got "")`)
        return limitsOf(options)
      },
      catch: (e) => e as BadOption
    }),
    (limits) =>
      withKeys((keys) => {
        const secret = ApiKeys.generate()
        return Effect.flatMap(
          keys.provision({
            digest: ApiKeys.digest(secret),
            workspace: options.workspace,
            management: options.management,
            interns: options.interns,
            label: Option.getOrUndefined(options.label),
            limits,
            source: "cli"
          }),
          (principal) =>
            Console.log(
              `created key ${principal.keyId} in workspace ${principal.workspace}${
                principal.management ? " (management)" : ""
              }${
                limits === undefined ? "" : `, limited to ${describeLimits(limits)}`
              }; it is shown only now:\n${secret}`
            )
        )
      })
  )

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
        ["ID", "WORKSPACE", "MANAGEMENT", "INTERNS", "SOURCE", "CREATED", "LABEL", "LIMITS"],
        ...all.map((k) => [
          k.keyId,
          k.workspace,
          k.management ? "yes" : "no",
          k.interns ? "yes" : "no",
          k.source,
          new Date(k.createdAt).toISOString(),
          k.label ?? "",
          describeLimits(k.limits)
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
