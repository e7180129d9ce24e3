/**
 * `GET /interns/{id}/daemon-access`: reveals the origin of a running intern's daemon and a short-lived credential for
 * it. Each reveal is written to the audit log (caller key, workspace, intern, time, outcome) before the runtime is
 * asked, which makes the log the rate limiter too: at most 10 reveals per minute per intern, counted atomically by the
 * store across processes. The runtime has 10 seconds to answer (then 408).
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { Conflict, InternalError, RateLimited, RequestTimeout } from "../errors/GatewayError.js"
import type { Intern } from "./Intern.js"
import type { InternCaller } from "./InternCaller.js"
import { lost } from "./InternLifecycle.js"
import type { InternRuntimeService } from "./InternRuntime.js"
import type { InternStoreService, RevealOutcome } from "./InternStore.js"

/** How long the runtime has to answer (spec 8). */
export const TIMEOUT = Duration.seconds(10)

/** Reveals allowed per intern in any minute. */
export const PER_MINUTE = 10

const MINUTE_MS = 60_000

/** What the client gets: where the daemon is, and the credential it verifies. */
export interface Access {
  readonly origin: string
  readonly token: string
}

export interface RevealPorts {
  readonly store: InternStoreService
  readonly runtime: InternRuntimeService
  /** Makes a reveal id at a time. */
  readonly revealId: (now: number) => Effect.Effect<string>
}

/** The 409 of an intern whose daemon is not running. */
export const notRunning = (intern: Intern): Conflict =>
  new Conflict({
    message: `Intern '${intern.id}' is not running (it is ${intern.status.replace("_", " ")})`,
    reason: "intern_not_running",
    retryable: false
  })

const outcomeOf = (exit: Exit.Exit<unknown, { readonly _tag: string }>): RevealOutcome => {
  if (Exit.isSuccess(exit)) return "revealed"
  switch (Option.getOrUndefined(Cause.failureOption(exit.cause))?._tag) {
    case "RequestTimeout":
      return "timeout"
    case "Conflict":
      return "not_running"
    default:
      return "failed"
  }
}

/** The daemon access of an intern the caller sees (see the module). */
export const reveal = (
  ports: RevealPorts,
  caller: InternCaller,
  intern: Intern
): Effect.Effect<Access, Conflict | RateLimited | RequestTimeout | InternalError> =>
  Effect.gen(function*() {
    if (intern.status !== "running") return yield* Effect.fail(notRunning(intern))
    const now = yield* Clock.currentTimeMillis
    const id = yield* ports.revealId(now)
    const reservation = yield* ports.store.reserveReveal({
      id,
      internId: intern.id,
      workspace: intern.workspace,
      keyId: caller.principal.keyId,
      requestId: caller.requestId,
      at: now,
      outcome: "pending"
    }, { since: now - MINUTE_MS + 1, max: PER_MINUTE })
    if (reservation._tag === "Limited") {
      return yield* Effect.fail(
        new RateLimited({
          message: `At most ${PER_MINUTE} daemon-access reveals per minute per intern; try again later`,
          retryAfterMs: Math.max(1, reservation.oldestAt + MINUTE_MS - now),
          reason: "rate_limited"
        })
      )
    }
    return yield* ports.runtime.access(intern.id).pipe(
      Effect.mapError((error) =>
        new InternalError({ message: `The intern runtime failed to reach '${intern.id}': ${error.message}` })
      ),
      Effect.timeoutFail({
        duration: TIMEOUT,
        onTimeout: () =>
          new RequestTimeout({
            message: `The intern runtime did not answer within ${Duration.toSeconds(TIMEOUT)} seconds`
          })
      }),
      Effect.flatMap(Option.match({
        // The store says running, the runtime has no daemon: it went away by itself. Say so on the intern.
        onNone: () =>
          Effect.zipRight(
            lost(ports.store, intern, "its daemon stopped unexpectedly; provision it again"),
            Effect.fail(notRunning({ ...intern, status: "failed" }))
          ),
        onSome: ({ origin, token }) => Effect.succeed({ origin, token })
      })),
      Effect.onExit((exit) => ports.store.settleReveal(id, outcomeOf(exit)))
    )
  })
