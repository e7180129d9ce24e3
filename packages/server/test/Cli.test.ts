import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { describe, expect, it } from "vitest"
import { plainConsole } from "../src/Cli.js"

/** A console that keeps what it is given. */
const recording = () => {
  const lines: Array<{ readonly to: string; readonly text: string }> = []
  const base = Effect.runSync(Console.consoleWith(Effect.succeed))
  const console = Object.assign(Object.create(base) as Console.Console, {
    log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => lines.push({ to: "out", text: args.join(" ") })),
    error: (...args: ReadonlyArray<unknown>) => Effect.sync(() => lines.push({ to: "err", text: args.join(" ") }))
  })
  return { console, lines }
}

const coloured = "\u001b[1mUSAGE\u001b[0m \u001b[36mmodel-gateway\u001b[39m"
const say = Effect.zipRight(Console.log(coloured), Console.error(coloured))

describe("plainConsole", () => {
  it("on a terminal, without NO_COLOR: the console itself, colours kept", () => {
    const { console } = recording()
    const tty = { env: {}, stdout: { isTTY: true }, stderr: { isTTY: true } }
    expect(plainConsole(console, tty)).toBe(console)
  })

  it("piped: each stream not a terminal loses its escapes, the other keeps them", () => {
    const { console, lines } = recording()
    const io = { env: {}, stdout: {}, stderr: { isTTY: true } }
    Effect.runSync(Console.withConsole(say, plainConsole(console, io)))
    expect(lines).toEqual([{ to: "out", text: "USAGE model-gateway" }, { to: "err", text: coloured }])
  })

  it("NO_COLOR set: plain on a terminal too; set empty, ignored (no-color.org)", () => {
    const tty = { stdout: { isTTY: true }, stderr: { isTTY: true } }
    const set = recording()
    Effect.runSync(Console.withConsole(say, plainConsole(set.console, { ...tty, env: { NO_COLOR: "1" } })))
    expect(set.lines.map((l) => l.text)).toEqual(["USAGE model-gateway", "USAGE model-gateway"])
    const empty = recording()
    expect(plainConsole(empty.console, { ...tty, env: { NO_COLOR: "" } })).toBe(empty.console)
  })
})
