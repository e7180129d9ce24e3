/**
 * Answers ended, and streamed frames sent, together at the end of the event loop's turn, rather than each at the
 * moment it is ready.
 *
 * Under load, one turn of the event loop runs the callbacks of many connections: requests read, upstream answers
 * read, fibers resumed. Ending each answer as soon as it is ready puts a `writev` (and the wake-up of the client
 * it goes to) between every two of those callbacks. Ended together after them, in one `setImmediate`, the turn's
 * writes come one after the other: the same system calls, fewer wake-ups, and the same code run back to back. An
 * answer waits at most for the rest of its turn; one request alone waits for nothing but the `setImmediate`.
 * Measured in docs/benchmarks.md ("writes at the end of the event loop's turn").
 *
 * A stream's last frames are written at once but sent at the end of the turn (`writeAtTurnEnd`): its socket is corked
 * until then. Node corks a response's socket on each write and uncorks it on the next tick, so a stream's last frames
 * went out in a system call of their own, and the chunked body's terminator, written when the upstream's end is read
 * a tick later, in another. Corked for the turn, the last frames and the terminator leave in one `writev` (`end`
 * uncorks the socket whole). Not every frame: a burst of reads (many streams' deltas in one turn) would then wait for
 * the whole turn, the first of them longest; the inter-chunk delay's p50 grew by 0.3 ms that way.
 */
import type { OutgoingMessage } from "node:http"
import type { Socket } from "node:net"

let messages: Array<OutgoingMessage> = []
let texts: Array<string> = []
let corked: Array<Socket> = []
let scheduled = false

const atTurnEnd = (): void => {
  scheduled = false
  const sockets = corked
  const ending = messages
  const bodies = texts
  corked = []
  messages = []
  texts = []
  for (let i = 0; i < sockets.length; i++) {
    const socket = sockets[i]!
    // Uncorked whole already when its answer ended (`end` does), or gone.
    if (socket.writableCorked > 0 && !socket.destroyed) socket.uncork()
  }
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

const schedule = (): void => {
  if (scheduled) return
  scheduled = true
  setImmediate(atTurnEnd)
}

/**
 * Ends `message` with `text` (its head already set) once the current turn's callbacks have run, in the order asked.
 */
export const endAtTurnEnd = (message: OutgoingMessage, text: string): void => {
  schedule()
  messages.push(message)
  texts.push(text)
}

/**
 * Writes `text` to `message` (a streamed body), its socket corked until the current turn's callbacks have run; what
 * `write` returns (false: wait for `drain`, which comes once the socket is uncorked and has sent its data).
 */
export const writeAtTurnEnd = (message: OutgoingMessage, text: string): boolean => {
  const socket = message.socket as Socket | null
  // Corked once a turn by us, on top of any cork of node's own: node corks a response's socket on a write and uncorks
  // it on the next tick, before the answer's end (a fiber resumed in a microtask). A cork of node's found here (frames
  // written earlier in the same callback, as when one upstream read holds two chunks of its body) is no cork of ours.
  if (socket !== null && !corked.includes(socket)) {
    socket.cork()
    corked.push(socket)
    schedule()
  }
  return message.write(text)
}
