/**
 * Identifiers of interns, chat sessions and reveals. An intern id sorts by creation: 12 hex digits of the creation
 * time in milliseconds, then 8 of a sequence that starts at a random value in each millisecond and counts up within
 * it, so the newest-first list is an order by id, and a cursor is just the last id seen.
 */
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"

const hex = (n: number, width: number): string => n.toString(16).padStart(width, "0")

/** A generator of time-ordered ids with `prefix` (ids made in one millisecond by one generator still ascend). */
export const timeOrdered = (prefix: string): (now: number) => Effect.Effect<string> => {
  let lastMs = -1
  let sequence = 0
  return (now) =>
    Effect.map(Random.nextIntBetween(0, 0x40000000), (start) => {
      if (now > lastMs) {
        lastMs = now
        sequence = start
      } else {
        sequence++
      }
      return `${prefix}${hex(lastMs, 12)}${hex(sequence, 8)}`
    })
}

/** A random id with `prefix`: 24 hex digits. */
export const random = (prefix: string): Effect.Effect<string> =>
  Effect.map(
    Effect.all([
      Random.nextIntBetween(0, 0x1000000),
      Random.nextIntBetween(0, 0x1000000),
      Random.nextIntBetween(0, 0x1000000),
      Random.nextIntBetween(0, 0x1000000)
    ]),
    (parts) => `${prefix}${parts.map((p) => hex(p, 6)).join("")}`
  )
