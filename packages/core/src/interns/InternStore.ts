/**
 * The intern store port: intern records (listed newest first with a cursor, changed only by compare-and-set on their
 * status), the conversations of their chat sessions, and the audit log of daemon-access reveals, whose per-intern
 * rate limit it enforces atomically (several gateway processes may share one store).
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { Intern, InternStatus, Progress } from "./Intern.js"

/** A create request's `Idempotency-Key` (unique per workspace) and the request it came with. */
export interface Idempotency {
  readonly key: string
  /** A canonical form of the create request: the same key with another request is a conflict. */
  readonly fingerprint: string
}

/** What `create` did: stored the intern, or found one already stored under the idempotency key. */
export type CreateResult =
  | { readonly _tag: "Created"; readonly intern: Intern }
  | { readonly _tag: "Existing"; readonly intern: Intern; readonly fingerprint: string }

export interface ListQuery {
  readonly workspace: string
  /** Only these statuses; every status when absent or empty. */
  readonly statuses?: ReadonlyArray<InternStatus> | undefined
  readonly limit: number
  /** Only interns after this id in the order of the list (older ones): the previous page's last id. */
  readonly startingAfter?: string | undefined
}

export interface Page {
  /** Newest first. */
  readonly interns: ReadonlyArray<Intern>
  readonly hasMore: boolean
}

/** Fields to change; an absent field is left as it is. */
export interface InternChanges {
  readonly status?: InternStatus | undefined
  readonly progress?: Progress | null | undefined
  readonly hostname?: string | null | undefined
  readonly name?: string | undefined
  readonly description?: string | null | undefined
  readonly instructions?: string | null | undefined
  readonly model?: string | null | undefined
  readonly lastFailureMessage?: string | null | undefined
  readonly updatedAt: number
}

/** One message of a chat session, as the intern's model sees it. */
export interface Turn {
  readonly role: "user" | "assistant"
  readonly content: string
}

/** How a daemon-access reveal ended: `pending` until the runtime answers. */
export type RevealOutcome = "pending" | "revealed" | "not_running" | "timeout" | "failed"

/** One entry of the audit log of daemon-access reveals: who asked for which intern's credential, and when. */
export interface Reveal {
  readonly id: string
  readonly internId: string
  readonly workspace: string
  /** The caller's key id (never the key). */
  readonly keyId: string
  readonly requestId: string
  /** Unix epoch milliseconds. */
  readonly at: number
  readonly outcome: RevealOutcome
}

/** The rate limit of reveals: at most `max` entries of one intern at or after `since`. */
export interface RevealLimit {
  readonly since: number
  readonly max: number
}

/** What `reserveReveal` did: logged the reveal, or refused it (the oldest entry in the window says when to retry). */
export type Reservation =
  | { readonly _tag: "Reserved" }
  | { readonly _tag: "Limited"; readonly oldestAt: number }

export interface InternStoreService {
  /**
   * Stores a new intern. With an idempotency key already used in the intern's workspace, stores nothing and gives the
   * intern stored under it, with the fingerprint it was created with.
   */
  readonly create: (intern: Intern, idempotency?: Idempotency) => Effect.Effect<CreateResult>
  /** An intern of the workspace; none for an unknown id or another workspace's intern. */
  readonly get: (workspace: string, id: string) => Effect.Effect<Option.Option<Intern>>
  readonly list: (query: ListQuery) => Effect.Effect<Page>
  /** Applies `changes` if the intern's status is still `expected`: the updated intern, or none (changed, or gone). */
  readonly update: (id: string, expected: InternStatus, changes: InternChanges) => Effect.Effect<Option.Option<Intern>>
  /** Removes an intern whose status is still `expected`, with its conversations; false when it is not (or gone). */
  readonly remove: (id: string, expected: InternStatus) => Effect.Effect<boolean>
  /** The last `limit` turns of a chat session, oldest first. */
  readonly conversation: (internId: string, sessionId: string, limit: number) => Effect.Effect<ReadonlyArray<Turn>>
  /** Appends turns to a chat session, in order. */
  readonly appendTurns: (
    internId: string,
    sessionId: string,
    turns: ReadonlyArray<Turn>,
    at: number
  ) => Effect.Effect<void>
  /**
   * Logs a reveal unless the intern already has `limit.max` reveals at or after `limit.since`: atomic, so that
   * concurrent reveals (from any process) never exceed the limit.
   */
  readonly reserveReveal: (reveal: Reveal, limit: RevealLimit) => Effect.Effect<Reservation>
  /** Records how a reserved reveal ended. */
  readonly settleReveal: (id: string, outcome: RevealOutcome) => Effect.Effect<void>
  /** An intern's reveals, newest first (they outlive the intern). */
  readonly reveals: (internId: string) => Effect.Effect<ReadonlyArray<Reveal>>
}

/** Port: intern records, their conversations and the daemon-access audit log. */
export class InternStore extends Context.Tag("@model-gateway/core/InternStore")<InternStore, InternStoreService>() {}
