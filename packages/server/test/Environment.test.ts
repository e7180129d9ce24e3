/** `LOG_LEVEL` as the README spells it (`warning`) and as Effect does (`warn`), in any case; anything else is named. */
import { ConfigProvider, Effect, Either, LogLevel } from "effect"
import { describe, expect, it } from "vitest"
import * as Environment from "../src/Environment.js"

const read = (env: Record<string, string>) =>
  Effect.runSync(
    Effect.either(Effect.withConfigProvider(Environment.logLevel, ConfigProvider.fromMap(new Map(Object.entries(env)))))
  )

describe("LOG_LEVEL", () => {
  it("is info by default, takes warning and warn alike, in any case", () => {
    expect(read({})).toEqual(Either.right(LogLevel.Info))
    expect(read({ LOG_LEVEL: "warning" })).toEqual(Either.right(LogLevel.Warning))
    expect(read({ LOG_LEVEL: "WARN" })).toEqual(Either.right(LogLevel.Warning))
    expect(read({ LOG_LEVEL: " Debug " })).toEqual(Either.right(LogLevel.Debug))
  })

  it("refuses anything else, naming what it takes", () => {
    const result = read({ LOG_LEVEL: "loud" })
    expect(Either.isLeft(result)).toBe(true)
    expect(String(Either.getLeft(result).pipe((o) => o._tag === "Some" ? o.value : ""))).toContain(
      "LOG_LEVEL must be one of all, trace, debug, info, warn, warning"
    )
  })
})
