/** What a newcomer reads when the configuration file is wrong: one line naming the key, and what it should be. */
import { describe, expect, it } from "vitest"
import { ConfigError, decode } from "../src/Config.js"

const problem = (raw: unknown): string => {
  try {
    decode(raw)
  } catch (error) {
    if (error instanceof ConfigError) return error.message
    throw error
  }
  throw new Error("decoded")
}

describe("configuration errors", () => {
  it.each([
    [{ models: [] }, "configuration key models: Expected an object, actual []"],
    [{ providers: [] }, "configuration key providers: Expected an object, actual []"],
    [{ keys: {} }, "configuration key keys: Expected an array, actual {}"],
    [
      { providers: { p: { kind: "anthropic", baseUrl: "https://x" } }, models: { m: { endpoints: {} } } },
      "configuration key models.m.endpoints: Expected an array, actual {}"
    ]
  ])("say a structure of the wrong kind as what it should be, not as its whole type (%j)", (raw, message) => {
    expect(problem(raw)).toBe(message)
  })

  it("name the variable of a ${VAR} that is not set, with its key", () => {
    const { warnings } = decode({
      providers: { p: { kind: "anthropic", baseUrl: "https://x", apiKey: "${P_KEY}" } },
      server: { host: "${HOST_NAME:-127.0.0.1}" }
    })
    expect(warnings).toEqual([
      "configuration key providers.p.apiKey: environment variable P_KEY is not set (it expands to \"\")"
    ])
  })
})
