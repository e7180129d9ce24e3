/**
 * In-process `InternStore`: interns in a Map (listed by id, which sorts by creation), conversations as arrays per
 * session, the reveal audit log as an array per intern. Every method runs synchronously, so each is atomic.
 */
import { type Intern as Interns, InternStore } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

type Intern = Interns.Intern

interface Stored {
  intern: Intern
  readonly idempotency: InternStore.Idempotency | undefined
}

const MAX_REVEALS_PER_INTERN = 10_000

/** Builds an empty in-memory intern store. */
export const make: Effect.Effect<InternStore.InternStoreService> = Effect.sync(() => {
  const interns = new Map<string, Stored>()
  const conversations = new Map<string, Array<InternStore.Turn>>()
  const reveals = new Map<string, Array<InternStore.Reveal>>()
  const sessionKey = (internId: string, sessionId: string) => `${internId}\u0000${sessionId}`

  const create = (intern: Intern, idempotency?: InternStore.Idempotency) =>
    Effect.sync((): InternStore.CreateResult => {
      if (idempotency !== undefined) {
        for (const stored of interns.values()) {
          if (stored.intern.workspace === intern.workspace && stored.idempotency?.key === idempotency.key) {
            return { _tag: "Existing", intern: stored.intern, fingerprint: stored.idempotency.fingerprint }
          }
        }
      }
      interns.set(intern.id, { intern, idempotency })
      return { _tag: "Created", intern }
    })

  const get = (workspace: string, id: string) =>
    Effect.sync(() => {
      const stored = interns.get(id)
      return stored !== undefined && stored.intern.workspace === workspace ? Option.some(stored.intern) : Option.none()
    })

  const list = (query: InternStore.ListQuery) =>
    Effect.sync((): InternStore.Page => {
      const statuses = query.statuses !== undefined && query.statuses.length > 0 ? new Set(query.statuses) : undefined
      const matching = [...interns.values()]
        .map((stored) => stored.intern)
        .filter((intern) =>
          intern.workspace === query.workspace &&
          (statuses === undefined || statuses.has(intern.status)) &&
          (query.startingAfter === undefined || intern.id < query.startingAfter)
        )
        .sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
      return { interns: matching.slice(0, query.limit), hasMore: matching.length > query.limit }
    })

  const update = (id: string, expected: Intern["status"], changes: InternStore.InternChanges) =>
    Effect.sync(() => {
      const stored = interns.get(id)
      if (stored === undefined || stored.intern.status !== expected) return Option.none<Intern>()
      const defined = Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined))
      stored.intern = { ...stored.intern, ...defined }
      return Option.some(stored.intern)
    })

  const remove = (id: string, expected: Intern["status"]) =>
    Effect.sync(() => {
      const stored = interns.get(id)
      if (stored === undefined || stored.intern.status !== expected) return false
      interns.delete(id)
      const prefix = `${id}\u0000`
      for (const key of conversations.keys()) if (key.startsWith(prefix)) conversations.delete(key)
      return true
    })

  const conversation = (internId: string, sessionId: string, limit: number) =>
    Effect.sync(() => (conversations.get(sessionKey(internId, sessionId)) ?? []).slice(-limit))

  const appendTurns = (internId: string, sessionId: string, turns: ReadonlyArray<InternStore.Turn>) =>
    Effect.sync(() => {
      const key = sessionKey(internId, sessionId)
      const existing = conversations.get(key) ?? []
      existing.push(...turns)
      conversations.set(key, existing)
    })

  const reserveReveal = (reveal: InternStore.Reveal, limit: InternStore.RevealLimit) =>
    Effect.sync((): InternStore.Reservation => {
      const log = reveals.get(reveal.internId) ?? []
      const recent = log.filter((r) => r.at >= limit.since)
      if (recent.length >= limit.max) {
        return { _tag: "Limited", oldestAt: Math.min(...recent.map((r) => r.at)) }
      }
      log.push(reveal)
      if (log.length > MAX_REVEALS_PER_INTERN) log.shift()
      reveals.set(reveal.internId, log)
      return { _tag: "Reserved" }
    })

  const settleReveal = (id: string, outcome: InternStore.RevealOutcome) =>
    Effect.sync(() => {
      for (const log of reveals.values()) {
        const i = log.findIndex((r) => r.id === id)
        if (i >= 0) {
          log[i] = { ...log[i], outcome }
          return
        }
      }
    })

  return InternStore.InternStore.of({
    create,
    get,
    list,
    update,
    remove,
    conversation,
    appendTurns,
    reserveReveal,
    settleReveal,
    reveals: (internId) => Effect.sync(() => [...(reveals.get(internId) ?? [])].reverse())
  })
})

/** The in-memory `InternStore` layer. */
export const layer: Layer.Layer<InternStore.InternStore> = Layer.effect(InternStore.InternStore, make)
