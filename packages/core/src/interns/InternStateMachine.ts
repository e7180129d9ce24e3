/**
 * The intern lifecycle as a pure transition function: which events each status accepts and where they lead. Every
 * other move is rejected. Stores apply the moves as compare-and-set updates, so two requests racing on one intern
 * cannot both succeed. A new intern is `queued`.
 *
 * | event            | from                                   | to             |
 * |------------------|----------------------------------------|----------------|
 * | provision        | queued, stopped, failed                | provisioning   |
 * | provisioned      | provisioning                           | running        |
 * | provision_failed | provisioning                           | failed         |
 * | suspend          | running, provisioning                  | stopped        |
 * | suspend_failed   | running, provisioning                  | failed         |
 * | lost             | running                                | failed         |
 * | destroy          | every status but destroying            | destroying     |
 * | destroyed        | destroying                             | (removed)      |
 * | destroy_failed   | destroying                             | destroy_failed |
 * | update           | every status but destroying            | (unchanged)    |
 */
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import type { InternStatus } from "./Intern.js"

/** What can happen to an intern: a client's request, or what its runtime reported. */
export const events = [
  /** A client asks to start (or restart) its daemon. */
  "provision",
  /** The runtime reports the daemon up. */
  "provisioned",
  "provision_failed",
  /** A client asks to stop its daemon. */
  "suspend",
  /** The runtime could not stop it. */
  "suspend_failed",
  /** Its daemon went away by itself (the runtime no longer has it). */
  "lost",
  /** A client deletes it. */
  "destroy",
  /** The runtime released everything: the record goes. */
  "destroyed",
  "destroy_failed",
  /** A client changes its name, description, instructions or model. */
  "update"
] as const

export type InternEvent = typeof events[number]

/** Where an event leads: a status, or the removal of the record. */
export type Target = InternStatus | "removed"

/** An event the intern's status does not accept. */
export class IllegalTransition extends Data.TaggedError("IllegalTransition")<{
  readonly from: InternStatus
  readonly event: InternEvent
}> {
  override get message(): string {
    return `an intern that is ${this.from.replace("_", " ")} cannot take '${this.event}'`
  }
}

const PROVISIONABLE: ReadonlySet<InternStatus> = new Set(["queued", "stopped", "failed"])
const SUSPENDABLE: ReadonlySet<InternStatus> = new Set(["running", "provisioning"])

const next = (from: InternStatus, event: InternEvent): Target | undefined => {
  switch (event) {
    case "provision":
      return PROVISIONABLE.has(from) ? "provisioning" : undefined
    case "provisioned":
      return from === "provisioning" ? "running" : undefined
    case "provision_failed":
      return from === "provisioning" ? "failed" : undefined
    case "suspend":
      return SUSPENDABLE.has(from) ? "stopped" : undefined
    case "suspend_failed":
      return SUSPENDABLE.has(from) ? "failed" : undefined
    case "lost":
      return from === "running" ? "failed" : undefined
    case "destroy":
      return from === "destroying" ? undefined : "destroying"
    case "destroyed":
      return from === "destroying" ? "removed" : undefined
    case "destroy_failed":
      return from === "destroying" ? "destroy_failed" : undefined
    case "update":
      return from === "destroying" ? undefined : from
  }
}

/** The status an event moves an intern to, or why it cannot. */
export const transition = (from: InternStatus, event: InternEvent): Either.Either<Target, IllegalTransition> => {
  const target = next(from, event)
  return target === undefined ? Either.left(new IllegalTransition({ from, event })) : Either.right(target)
}

/** The events a status accepts. */
export const accepted = (from: InternStatus): ReadonlyArray<InternEvent> =>
  events.filter((event) => next(from, event) !== undefined)
