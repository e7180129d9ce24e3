/**
 * The batches use case as a service: submit a batch (every request checked, stored as `validating`; the workers run
 * it), list a workspace's batches, read one (with its results, in submission order, once it is terminal), delete a
 * terminal one, and cancel one in progress. A batch of another workspace is not found. The steps live beside it
 * (`BatchRequests`, `BatchItems`, `BatchRoutes`, `BatchChecks`, `BatchResults`).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Stream from "effect/Stream"
import type { Principal } from "../auth/Keys.js"
import { Catalogue } from "../catalogue/Catalogue.js"
import * as GatewayError from "../errors/GatewayError.js"
import { tooDeep, tooDeepError } from "../internal/RequestSchema.js"
import * as InternIds from "../interns/InternIds.js"
import { type Batch, isTerminal, type ItemResult } from "./Batch.js"
import * as BatchChecks from "./BatchChecks.js"
import * as BatchItems from "./BatchItems.js"
import * as BatchRequests from "./BatchRequests.js"
import * as BatchResults from "./BatchResults.js"
import * as BatchStateMachine from "./BatchStateMachine.js"
import { BatchStore, type Page } from "./BatchStore.js"

/** Who submits a batch, and the app the client-identification headers name. */
export interface BatchCaller {
  readonly principal: Principal
  readonly app: {
    readonly referer?: string | undefined
    readonly title?: string | undefined
    readonly categories?: string | undefined
  }
}

/** A batch, with its results when it is terminal (read from the store as they are written out). */
export interface BatchView {
  readonly batch: Batch
  readonly results: Stream.Stream<ItemResult> | undefined
}

export interface BatchesShape {
  /** The largest submission body, in bytes (the route reads no more). */
  readonly maxBodyBytes: number
  readonly create: (caller: BatchCaller, body: unknown) => Effect.Effect<Batch, GatewayError.GatewayError>
  readonly list: (
    principal: Principal,
    params: BatchRequests.ListParams
  ) => Effect.Effect<Page, GatewayError.GatewayError>
  readonly get: (principal: Principal, id: string) => Effect.Effect<BatchView, GatewayError.GatewayError>
  /** Deletes a terminal batch with its requests and results (usage records stay); the batch as it was, and when. */
  readonly remove: (
    principal: Principal,
    id: string
  ) => Effect.Effect<{ readonly batch: Batch; readonly deletedAt: number }, GatewayError.GatewayError>
  /** Moves a batch to `cancelling`: no request starts any more; those running finish, then it is `cancelled`. */
  readonly cancel: (principal: Principal, id: string) => Effect.Effect<Batch, GatewayError.GatewayError>
}

/** The batches use case. */
export class Batches extends Context.Tag("@model-gateway/core/Batches")<Batches, BatchesShape>() {}

export interface BatchesOptions {
  /** Most requests per batch (default 5,000); more is a 413. */
  readonly maxRequests?: number | undefined
  /** Largest submission body in bytes (default 200 MiB); larger is a 413. */
  readonly maxBodyBytes?: number | undefined
  /** How long the completion window `24h` lasts, in milliseconds (a day; shorter in tests). */
  readonly windowMs?: number | undefined
  /** The auto-router's slug (`auto` unless configured otherwise): a batch's model the router chooses for. */
  readonly routerSlug?: string | undefined
}

export const DEFAULT_MAX_REQUESTS = 5_000
export const DEFAULT_MAX_BODY_BYTES = 200 * 1024 * 1024
export const DAY_MS = 86_400_000

/** How many times a client's move is tried again when a worker moved the batch in between. */
const RACE_RETRIES = 3

const notFound = (id: string) => new GatewayError.NotFound({ message: `Batch '${id}' not found` })

/** Builds the service from its ports. */
export const make = (options: BatchesOptions = {}) =>
  Effect.gen(function*() {
    const store = yield* BatchStore
    const catalogue = yield* Catalogue
    const maxRequests = options.maxRequests ?? DEFAULT_MAX_REQUESTS
    const windowMs = options.windowMs ?? DAY_MS
    const batchId = InternIds.timeOrdered("batch_")

    const decode = <A, E>(result: Either.Either<A, E>) =>
      Either.isLeft(result) ? Effect.fail(result.left) : Effect.succeed(result.right)

    const find = (principal: Principal, id: string) =>
      Effect.flatMap(store.get(principal.workspace, id), (found) =>
        Option.isSome(found) ? Effect.succeed(found.value) : Effect.fail(notFound(id)))

    const create: BatchesShape["create"] = (caller, body) =>
      Effect.gen(function*() {
        if (tooDeep(body)) {
          return yield* Effect.fail(tooDeepError())
        }
        const submission = yield* decode(BatchRequests.submission(body, maxRequests))
        const snapshot = yield* catalogue.snapshot
        const problem = BatchChecks.check(snapshot, submission.model, submission.provider, options.routerSlug)
        if (problem !== undefined) {
          return yield* Effect.fail(
            problem._tag === "UnknownModel"
              ? new GatewayError.NotFound({ message: problem.message })
              : new GatewayError.InvalidRequest({ message: problem.message, param: "provider.only" })
          )
        }
        const now = yield* Clock.currentTimeMillis
        const id = yield* batchId(now)
        const items = yield* decode(BatchItems.prepare(submission, id, snapshot, options.routerSlug))
        const batch: Batch = {
          id,
          workspace: caller.principal.workspace,
          keyId: caller.principal.keyId,
          endpoint: submission.endpoint,
          model: submission.model,
          completionWindow: "24h",
          status: "validating",
          provider: submission.provider,
          app: {
            referer: caller.app.referer ?? null,
            title: caller.app.title ?? null,
            categories: caller.app.categories ?? null
          },
          counts: { total: items.length, completed: 0, failed: 0 },
          usage: { promptTokens: 0, completionTokens: 0, cost: "0" },
          errorMessage: null,
          createdAt: now,
          expiresAt: now + windowMs,
          finalizedAt: null,
          updatedAt: now
        }
        yield* store.create(batch, items)
        return batch
      })

    const list: BatchesShape["list"] = (principal, params) =>
      Effect.flatMap(decode(BatchRequests.listOptions(params)), (query) =>
        store.list({
          workspace: principal.workspace,
          limit: query.limit,
          after: query.after,
          statuses: query.statuses,
          createdAfter: query.createdAfter,
          createdBefore: query.createdBefore
        }))

    const get: BatchesShape["get"] = (principal, id) =>
      Effect.map(find(principal, id), (batch) => ({
        batch,
        results: isTerminal(batch.status) ? BatchResults.stream(store, batch) : undefined
      }))

    const remove: BatchesShape["remove"] = (principal, id) =>
      Effect.gen(function*() {
        for (let i = 0;; i++) {
          const batch = yield* find(principal, id)
          if (!isTerminal(batch.status)) {
            return yield* Effect.fail(
              new GatewayError.Conflict({
                message: `Batch '${id}' is ${batch.status}: only completed, failed, expired or cancelled batches ` +
                  `can be deleted (cancel it first)`,
                reason: "batch_in_progress",
                retryable: false
              })
            )
          }
          const now = yield* Clock.currentTimeMillis
          if (yield* store.remove(principal.workspace, id, batch.status)) {
            return { batch, deletedAt: now }
          }
          if (i >= RACE_RETRIES) {
            return yield* Effect.fail(notFound(id))
          }
        }
      })

    const cancel: BatchesShape["cancel"] = (principal, id) =>
      Effect.gen(function*() {
        for (let i = 0;; i++) {
          const batch = yield* find(principal, id)
          if (batch.status === "cancelling") {
            return batch
          }
          const target = BatchStateMachine.transition(batch.status, "cancel")
          if (Either.isLeft(target)) {
            return yield* Effect.fail(
              new GatewayError.Conflict({ message: target.left.message, reason: "invalid_state", retryable: false })
            )
          }
          const now = yield* Clock.currentTimeMillis
          const moved = yield* store.transition(id, batch.status, { status: target.right, updatedAt: now })
          if (Option.isSome(moved)) {
            return moved.value
          }
          if (i >= RACE_RETRIES) {
            return yield* Effect.fail(
              new GatewayError.Conflict({
                message: `Batch '${id}' changed while it was being cancelled; try again`,
                reason: "concurrent_update",
                retryable: true
              })
            )
          }
        }
      })

    return Batches.of({
      maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
      create,
      list,
      get,
      remove,
      cancel
    })
  })

/** The service, given BatchStore and Catalogue. */
export const layer = (options: BatchesOptions = {}) => Layer.effect(Batches, make(options))
