/**
 * The intern runtime port: provisions an intern's daemon (reporting progress as it goes), suspends and destroys it,
 * and reaches it: the origin a terminal client attaches to and a short-lived credential the daemon verifies. The
 * gateway's own runtime runs each daemon as a local process (`LocalInternRuntime` in the server package); another
 * may run them on other machines.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Stream from "effect/Stream"
import type { Progress } from "./Intern.js"

/** What a runtime knows of the intern it provisions. */
export interface DaemonSpec {
  readonly internId: string
  readonly workspace: string
  readonly name: string
}

/** A provisioning step reached, then the daemon up (the last event). */
export type ProvisionEvent =
  | { readonly _tag: "Progress"; readonly progress: Progress }
  | { readonly _tag: "Ready"; readonly hostname: string }

/** The runtime failed to do what it was asked; the message says why (it is shown as `last_failure_message`). */
export class InternRuntimeError extends Data.TaggedError("InternRuntimeError")<{ readonly message: string }> {}

/** How to reach a running daemon: an origin and a credential for it alone, valid until `expiresAt`. */
export interface DaemonAccess {
  /** The daemon's URL origin, e.g. `https://intern_0123.interns.example.com`. */
  readonly origin: string
  readonly token: string
  /** Unix epoch milliseconds. */
  readonly expiresAt: number
}

export interface InternRuntimeService {
  /**
   * Starts the intern's daemon (replacing one that may be left over): progress events as each step is reached, then
   * `Ready`. Interrupting the stream releases what was started.
   */
  readonly provision: (spec: DaemonSpec) => Stream.Stream<ProvisionEvent, InternRuntimeError>
  /** Stops the intern's daemon; nothing to do when none runs. */
  readonly suspend: (internId: string) => Effect.Effect<void, InternRuntimeError>
  /** Stops the intern's daemon and releases everything the runtime keeps for it. */
  readonly destroy: (internId: string) => Effect.Effect<void, InternRuntimeError>
  /** A fresh credential for the intern's daemon; none when no daemon of the intern runs. */
  readonly access: (internId: string) => Effect.Effect<Option.Option<DaemonAccess>, InternRuntimeError>
}

/** Port: where interns' daemons run. */
export class InternRuntime extends Context.Tag("@model-gateway/core/InternRuntime")<
  InternRuntime,
  InternRuntimeService
>() {}
