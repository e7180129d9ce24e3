/**
 * The interns use case as a service: list, create (idempotent with an `Idempotency-Key`), read, edit, provision,
 * suspend and delete a workspace's interns, and reveal a running intern's daemon access. Every operation first
 * checks the caller (`InternCaller`: programme, regional hostname, workspace). The steps live beside it
 * (`InternLifecycle`, `DaemonAccess`, `InternRequests`).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import { Catalogue } from "../catalogue/Catalogue.js"
import type * as GatewayError from "../errors/GatewayError.js"
import { Conflict, InvalidRequest, NotFound } from "../errors/GatewayError.js"
import * as DaemonAccess from "./DaemonAccess.js"
import type { Intern } from "./Intern.js"
import { admit, hostnameOf, type InternCaller, visible } from "./InternCaller.js"
import * as InternIds from "./InternIds.js"
import * as InternLifecycle from "./InternLifecycle.js"
import * as InternRequests from "./InternRequests.js"
import { InternRuntime } from "./InternRuntime.js"
import { InternStore } from "./InternStore.js"

export type { InternCaller } from "./InternCaller.js"

/** A page of the list. */
export interface InternPage {
  readonly interns: ReadonlyArray<Intern>
  readonly hasMore: boolean
  /** The `starting_after` of the next page, when there is one. */
  readonly nextCursor: string | undefined
}

export interface InternsShape {
  readonly list: (
    caller: InternCaller,
    params: InternRequests.ListParams
  ) => Effect.Effect<InternPage, GatewayError.GatewayError>
  /** `created` is false when an `Idempotency-Key` replayed an earlier create. */
  readonly create: (
    caller: InternCaller,
    body: unknown,
    idempotencyKey: string | undefined
  ) => Effect.Effect<{ readonly created: boolean; readonly intern: Intern }, GatewayError.GatewayError>
  readonly get: (caller: InternCaller, id: string) => Effect.Effect<Intern, GatewayError.GatewayError>
  readonly update: (caller: InternCaller, id: string, body: unknown) => Effect.Effect<Intern, GatewayError.GatewayError>
  /** Starts provisioning; the intern is `provisioning` when this returns. */
  readonly provision: (caller: InternCaller, id: string) => Effect.Effect<Intern, GatewayError.GatewayError>
  readonly suspend: (caller: InternCaller, id: string) => Effect.Effect<Intern, GatewayError.GatewayError>
  /** Starts deleting; the intern is `destroying` when this returns, and gone once its runtime has released it. */
  readonly remove: (caller: InternCaller, id: string, body: unknown) => Effect.Effect<Intern, GatewayError.GatewayError>
  readonly daemonAccess: (
    caller: InternCaller,
    id: string
  ) => Effect.Effect<DaemonAccess.Access, GatewayError.GatewayError>
}

/** The interns use case. */
export class Interns extends Context.Tag("@model-gateway/core/Interns")<Interns, InternsShape>() {}

export interface InternsOptions {
  /** Host names (without port) on which intern routes are refused with 403. */
  readonly regionalHostnames?: ReadonlyArray<string> | undefined
  /** The model of an intern created without one. */
  readonly defaultModel?: string | undefined
}

const MAX_IDEMPOTENCY_KEY = 256

/** Builds the service from its ports; its background work (provisioning, deletion) ends with the scope. */
export const make = (options: InternsOptions = {}) =>
  Effect.gen(function*() {
    const store = yield* InternStore
    const runtime = yield* InternRuntime
    const catalogue = yield* Catalogue
    const fibers = yield* FiberMap.make<string>()
    const regional: ReadonlySet<string> = new Set((options.regionalHostnames ?? []).map(hostnameOf))
    const internId = InternIds.timeOrdered("intern_")
    const lifecycle: InternLifecycle.LifecyclePorts = { store, runtime, fibers }
    const reveals: DaemonAccess.RevealPorts = { store, runtime, revealId: InternIds.timeOrdered("reveal_") }

    const see = (caller: InternCaller, id: string) => visible(store, regional, caller, id)

    const decode = <A>(result: Either.Either<A, InvalidRequest>) =>
      Either.isLeft(result) ? Effect.fail(result.left) : Effect.succeed(result.right)

    const knownModel = (model: string | null | undefined) =>
      model === undefined || model === null
        ? Effect.void
        : Effect.flatMap(catalogue.snapshot, (snapshot) =>
          snapshot.models.has(model)
            ? Effect.void
            : Effect.fail(
              new InvalidRequest({ message: `model: '${model}' is not a model of this gateway`, param: "model" })
            ))

    /** The workspace a request names must be the key's own: there is no other workspace to see. */
    const ownWorkspace = (workspace: string, named: string | undefined) =>
      named === undefined || named === workspace
        ? Effect.void
        : Effect.fail(new NotFound({ message: `Workspace '${named}' not found` }))

    const list: InternsShape["list"] = (caller, params) =>
      Effect.gen(function*() {
        const workspace = yield* admit(caller, regional)
        const query = yield* decode(InternRequests.listOptions(params))
        yield* ownWorkspace(workspace, query.workspace)
        const page = yield* store.list({
          workspace,
          statuses: query.statuses,
          limit: query.limit,
          startingAfter: query.startingAfter
        })
        const last = page.interns.at(-1)
        return { ...page, nextCursor: page.hasMore && last !== undefined ? last.id : undefined }
      })

    const create: InternsShape["create"] = (caller, body, idempotencyKey) =>
      Effect.gen(function*() {
        const workspace = yield* admit(caller, regional)
        const request = yield* decode(InternRequests.decodeBody(InternRequests.CreateIntern)(body))
        yield* ownWorkspace(workspace, request.workspace_id)
        if (idempotencyKey !== undefined && (idempotencyKey === "" || idempotencyKey.length > MAX_IDEMPOTENCY_KEY)) {
          return yield* Effect.fail(
            new InvalidRequest({ message: `Idempotency-Key: must be 1 to ${MAX_IDEMPOTENCY_KEY} characters` })
          )
        }
        const model = request.model ?? options.defaultModel ?? null
        yield* knownModel(model)
        const now = yield* Clock.currentTimeMillis
        const intern: Intern = {
          id: yield* internId(now),
          workspace,
          name: request.name,
          description: request.description ?? null,
          instructions: request.instructions ?? null,
          model,
          status: "queued",
          progress: null,
          hostname: null,
          vaultId: request.vault_id ?? null,
          attachedVaultId: null,
          lastFailureMessage: null,
          createdAt: now,
          updatedAt: now
        }
        const fingerprint = InternRequests.fingerprint(request)
        const result = yield* store.create(
          intern,
          idempotencyKey === undefined ? undefined : { key: idempotencyKey, fingerprint }
        )
        if (result._tag === "Existing") {
          if (result.fingerprint !== fingerprint) {
            return yield* Effect.fail(
              new Conflict({
                message: "Idempotency-Key was already used with a different request",
                reason: "idempotency_key_reused",
                retryable: false
              })
            )
          }
          return { created: false, intern: result.intern }
        }
        const created = request.provision === true
          ? yield* InternLifecycle.provision(lifecycle, result.intern)
          : result.intern
        return { created: true, intern: created }
      })

    const get: InternsShape["get"] = see

    const update: InternsShape["update"] = (caller, id, body) =>
      Effect.gen(function*() {
        const intern = yield* see(caller, id)
        const edits = yield* decode(InternRequests.decodeBody(InternRequests.UpdateIntern)(body))
        yield* knownModel(edits.model)
        return yield* InternLifecycle.move(store, intern, "update", edits)
      })

    const provision: InternsShape["provision"] = (caller, id) =>
      Effect.flatMap(see(caller, id), (intern) => InternLifecycle.provision(lifecycle, intern))

    const suspend: InternsShape["suspend"] = (caller, id) =>
      Effect.flatMap(see(caller, id), (intern) => InternLifecycle.suspend(lifecycle, intern))

    const remove: InternsShape["remove"] = (caller, id, body) =>
      Effect.gen(function*() {
        const intern = yield* see(caller, id)
        if (body !== undefined) yield* decode(InternRequests.decodeBody(InternRequests.DeleteIntern)(body))
        return yield* InternLifecycle.destroy(lifecycle, intern)
      })

    const daemonAccess: InternsShape["daemonAccess"] = (caller, id) =>
      Effect.flatMap(see(caller, id), (intern) => DaemonAccess.reveal(reveals, caller, intern))

    return Interns.of({ list, create, get, update, provision, suspend, remove, daemonAccess })
  })

/** The service, given InternStore, InternRuntime and Catalogue. */
export const layer = (options: InternsOptions = {}) => Layer.scoped(Interns, make(options))
