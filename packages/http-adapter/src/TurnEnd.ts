/**
 * Answers ended together at the end of the event loop's turn, rather than each at the moment it is ready.
 *
 * Under load, one turn of the event loop runs the callbacks of many connections: requests read, upstream answers
 * read, fibers resumed. Ending each answer as soon as it is ready puts a `writev` (and the wake-up of the client
 * it goes to) between every two of those callbacks. Ended together after them, in one `setImmediate`, the turn's
 * writes come one after the other: the same system calls, fewer wake-ups, and the same code run back to back. An
 * answer waits at most for the rest of its turn; one request alone waits for nothing but the `setImmediate`.
 * Measured in docs/benchmarks.md ("writes at the end of the event loop's turn").
 */
import type { OutgoingMessage } from "node:http"

let messages: Array<OutgoingMessage> = []
let texts: Array<string> = []

const endAll = (): void => {
  const ending = messages
  const bodies = texts
  messages = []
  texts = []
  for (let i = 0; i < ending.length; i++) {
    const message = ending[i]!
    // Gone in the meantime (the client closed): nothing to write.
    if (message.destroyed) continue
    try {
      message.end(bodies[i])
    } catch (error) {
      message.destroy(error as Error)
    }
  }
}

/**
 * Ends `message` with `text` (its head already set) once the current turn's callbacks have run, in the order asked.
 */
export const endAtTurnEnd = (message: OutgoingMessage, text: string): void => {
  if (messages.length === 0) setImmediate(endAll)
  messages.push(message)
  texts.push(text)
}
