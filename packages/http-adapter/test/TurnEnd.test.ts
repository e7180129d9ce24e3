/**
 * Answers ended at the end of the event loop's turn: not before it, in the order asked, none for a response already
 * gone, and one whose end throws is destroyed without keeping the others from ending. Frames written at once, their
 * socket corked until the turn's end, and uncorked then only if nothing (an `end`) uncorked it already.
 */
import { describe, expect, it } from "@effect/vitest"
import type { OutgoingMessage } from "node:http"
import { endAtTurnEnd, writeAtTurnEnd } from "../src/TurnEnd.js"

const fake = (name: string, log: Array<string>, options: { destroyed?: boolean; throws?: boolean } = {}) => {
  const message = {
    destroyed: options.destroyed ?? false,
    end: (text: string) => {
      if (options.throws === true) throw new Error("write failed")
      log.push(`${name}:${text}`)
    },
    destroy: (error?: Error) => {
      message.destroyed = true
      log.push(`${name} destroyed: ${error?.message}`)
    }
  }
  return message
}

const asMessage = (m: ReturnType<typeof fake>) => m as unknown as OutgoingMessage

describe("TurnEnd", () => {
  it("ends the turn's answers after its other callbacks, in the order asked", async () => {
    const log: Array<string> = []
    endAtTurnEnd(asMessage(fake("a", log)), "1")
    endAtTurnEnd(asMessage(fake("b", log)), "2")
    await Promise.resolve()
    await new Promise((resolve) => process.nextTick(resolve))
    expect(log).toEqual([])
    await new Promise((resolve) => setImmediate(resolve))
    expect(log).toEqual(["a:1", "b:2"])
  })

  it("writes nothing to a response gone meanwhile; a throwing end destroys its response, the next still ends", async () => {
    const log: Array<string> = []
    const gone = fake("gone", log)
    endAtTurnEnd(asMessage(gone), "x")
    endAtTurnEnd(asMessage(fake("broken", log, { throws: true })), "y")
    endAtTurnEnd(asMessage(fake("fine", log)), "z")
    gone.destroyed = true
    await new Promise((resolve) => setImmediate(resolve))
    expect(log).toEqual(["broken destroyed: write failed", "fine:z"])
  })

  it("answers asked for during a later turn wait for that turn's end", async () => {
    const log: Array<string> = []
    endAtTurnEnd(asMessage(fake("first", log)), "1")
    await new Promise((resolve) => setImmediate(resolve))
    endAtTurnEnd(asMessage(fake("second", log)), "2")
    expect(log).toEqual(["first:1"])
    await new Promise((resolve) => setImmediate(resolve))
    expect(log).toEqual(["first:1", "second:2"])
  })

  it("writes at once, the socket corked once until the turn's end; a socket uncorked meanwhile is left alone", async () => {
    const log: Array<string> = []
    const socketOf = (name: string) => {
      const socket = {
        writableCorked: 0,
        destroyed: false,
        cork: () => {
          socket.writableCorked++
          log.push(`${name} cork`)
        },
        uncork: () => {
          socket.writableCorked--
          log.push(`${name} uncork`)
        }
      }
      return socket
    }
    const messageOf = (name: string, socket: ReturnType<typeof socketOf>) =>
      ({
        socket,
        write: (text: string) => {
          log.push(`${name} write ${text}`)
          return text !== "full"
        }
      }) as unknown as OutgoingMessage
    const a = socketOf("a")
    const b = socketOf("b")
    expect(writeAtTurnEnd(messageOf("a", a), "1")).toBe(true)
    expect(writeAtTurnEnd(messageOf("a", a), "full")).toBe(false)
    writeAtTurnEnd(messageOf("b", b), "2")
    expect(log).toEqual(["a cork", "a write 1", "a write full", "b cork", "b write 2"])
    // b's answer ended within the turn: `end` uncorks its socket whole.
    b.writableCorked = 0
    await new Promise((resolve) => process.nextTick(resolve))
    expect(a.writableCorked).toBe(1)
    await new Promise((resolve) => setImmediate(resolve))
    expect(log.slice(5)).toEqual(["a uncork"])
    expect(a.writableCorked).toBe(0)
    expect(b.writableCorked).toBe(0)
  })

  it("corks a socket that node's own cork holds already: that one is undone on the next tick, ours at the turn's end", async () => {
    let corks = 0
    const socket = {
      writableCorked: 1,
      destroyed: false,
      cork: () => {
        corks++
        socket.writableCorked++
      },
      uncork: () => {
        socket.writableCorked--
      }
    }
    const message = { socket, write: () => true } as unknown as OutgoingMessage
    // Node's cork of an earlier write in this callback, undone on the next tick.
    process.nextTick(() => socket.uncork())
    writeAtTurnEnd(message, "last")
    expect(corks).toBe(1)
    await new Promise((resolve) => process.nextTick(resolve))
    expect(socket.writableCorked).toBe(1)
    await new Promise((resolve) => setImmediate(resolve))
    expect(socket.writableCorked).toBe(0)
  })
})
