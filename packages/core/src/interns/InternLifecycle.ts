/**
 * The lifecycle moves of an intern, each checked by the state machine and applied to the store as a compare-and-set:
 * provisioning (in the background, its progress recorded step by step), suspension, destruction (in the background,
 * then the record goes) and edits. Background work runs in a `FiberMap` keyed by intern, so that suspending or
 * deleting an intern interrupts its provisioning, and closing the service interrupts everything.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberMap from "effect/FiberMap"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { Conflict, InternalError } from "../errors/GatewayError.js"
import type { Intern, InternStatus } from "./Intern.js"
import type { DaemonSpec, InternRuntimeService } from "./InternRuntime.js"
import { type InternEvent, transition } from "./InternStateMachine.js"
import type { InternChanges, InternStoreService } from "./InternStore.js"

export interface LifecyclePorts {
  readonly store: InternStoreService
  readonly runtime: InternRuntimeService
  /** The background work of each intern (provisioning, destruction). */
  readonly fibers: FiberMap.FiberMap<string, unknown, unknown>
}

const VERBS: Partial<Record<InternEvent, string>> = {
  provision: "provision",
  suspend: "suspend",
  destroy: "delete",
  update: "update"
}

const illegal = (intern: Intern, event: InternEvent): Conflict =>
  new Conflict({
    message: `Cannot ${VERBS[event] ?? event} intern '${intern.id}': it is ${intern.status.replace("_", " ")}`,
    reason: "invalid_state",
    retryable: false
  })

const raced = (intern: Intern): Conflict =>
  new Conflict({
    message: `Intern '${intern.id}' changed during the request; read it again`,
    reason: "concurrent_update",
    retryable: true
  })

type Fields = Omit<InternChanges, "status" | "updatedAt">

/**
 * Applies a client's event to an intern: refused (409) when its status does not accept the event, or when the intern
 * changed since it was read.
 */
export const move = (
  store: InternStoreService,
  intern: Intern,
  event: InternEvent,
  fields: Fields = {}
): Effect.Effect<Intern, Conflict> => {
  const target = transition(intern.status, event)
  if (Either.isLeft(target) || target.right === "removed") return Effect.fail(illegal(intern, event))
  const status = target.right
  return Effect.flatMap(Clock.currentTimeMillis, (now) =>
    Effect.flatMap(
      store.update(intern.id, intern.status, { ...fields, status, updatedAt: now }),
      Option.match({ onNone: () => Effect.fail(raced(intern)), onSome: Effect.succeed })
    ))
}

/** Applies what the runtime reported to an intern still in `from`; nothing when it has moved on meanwhile. */
const settle = (
  store: InternStoreService,
  id: string,
  from: InternStatus,
  event: InternEvent,
  fields: Fields
): Effect.Effect<void> => {
  const target = transition(from, event)
  if (Either.isLeft(target)) return Effect.void
  return Effect.flatMap(Clock.currentTimeMillis, (now) =>
    target.right === "removed"
      ? Effect.asVoid(store.remove(id, from))
      : Effect.asVoid(store.update(id, from, { ...fields, status: target.right, updatedAt: now })))
}

/** Records that a running intern's daemon is gone (the runtime no longer has it): `failed`, with why. */
export const lost = (store: InternStoreService, intern: Intern, message: string): Effect.Effect<void> =>
  settle(store, intern.id, "running", "lost", { hostname: null, lastFailureMessage: message })

const specOf = (intern: Intern): DaemonSpec => ({ internId: intern.id, workspace: intern.workspace, name: intern.name })

/** The provisioning of an intern by its runtime: each step recorded as progress, then running (or failed). */
const provisioning = (ports: LifecyclePorts, intern: Intern): Effect.Effect<void> => {
  let ready = false
  return ports.runtime.provision(specOf(intern)).pipe(
    Stream.runForEach((event) =>
      event._tag === "Progress"
        ? Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.asVoid(
            ports.store.update(intern.id, "provisioning", { progress: event.progress, updatedAt: now })
          ))
        : Effect.suspend(() => {
          ready = true
          return settle(ports.store, intern.id, "provisioning", "provisioned", {
            progress: null,
            hostname: event.hostname
          })
        })
    ),
    Effect.zipRight(
      Effect.suspend(() =>
        ready ? Effect.void : settle(ports.store, intern.id, "provisioning", "provision_failed", {
          progress: null,
          lastFailureMessage: "the runtime ended provisioning without starting the daemon"
        })
      )
    ),
    Effect.catchAll((error) =>
      settle(ports.store, intern.id, "provisioning", "provision_failed", {
        progress: null,
        lastFailureMessage: error.message
      })
    )
  )
}

/** Starts provisioning an intern: `provisioning` now, `running` (or `failed`) when its runtime is done. */
export const provision = (ports: LifecyclePorts, intern: Intern): Effect.Effect<Intern, Conflict> =>
  Effect.tap(
    move(ports.store, intern, "provision", { progress: null, lastFailureMessage: null }),
    (started) => FiberMap.run(ports.fibers, intern.id, provisioning(ports, started))
  )

/**
 * Stops an intern's daemon (interrupting its provisioning): `stopped`; `failed` (and a 500) when the runtime cannot
 * stop it.
 */
export const suspend = (ports: LifecyclePorts, intern: Intern): Effect.Effect<Intern, Conflict | InternalError> =>
  Effect.gen(function*() {
    if (Either.isLeft(transition(intern.status, "suspend"))) return yield* Effect.fail(illegal(intern, "suspend"))
    yield* FiberMap.remove(ports.fibers, intern.id)
    // Provisioning may have finished (or failed) before it was interrupted: move from where it is now.
    const current = Option.getOrElse(yield* ports.store.get(intern.workspace, intern.id), () => intern)
    const stopped = yield* Effect.either(ports.runtime.suspend(intern.id))
    if (Either.isRight(stopped)) return yield* move(ports.store, current, "suspend", { progress: null, hostname: null })
    yield* move(ports.store, current, "suspend_failed", { progress: null, lastFailureMessage: stopped.left.message })
    return yield* Effect.fail(
      new InternalError({ message: `Could not stop intern '${intern.id}': ${stopped.left.message}` })
    )
  })

/** Starts deleting an intern: `destroying` now; the record goes once its runtime has released it (else `destroy_failed`). */
export const destroy = (ports: LifecyclePorts, intern: Intern): Effect.Effect<Intern, Conflict> =>
  Effect.gen(function*() {
    const destroying = yield* move(ports.store, intern, "destroy", { progress: null })
    yield* FiberMap.remove(ports.fibers, intern.id)
    const destruction = ports.runtime.destroy(intern.id).pipe(
      Effect.matchEffect({
        onSuccess: () => settle(ports.store, intern.id, "destroying", "destroyed", {}),
        onFailure: (error) =>
          settle(ports.store, intern.id, "destroying", "destroy_failed", { lastFailureMessage: error.message })
      })
    )
    yield* FiberMap.run(ports.fibers, intern.id, destruction)
    return destroying
  })
