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

  const provider = { p: { kind: "anthropic", baseUrl: "https://x" } }
  it.each([
    [{ keys: ["sk-live-VERYSECRET-0001"] }, "configuration key keys[0]: Expected Struct (Encoded side), actual"],
    [{ keys: [{ key: { value: "sk-live-VERYSECRET-0002" } }] }, "configuration key keys[0].key:"],
    [
      { providers: { p: { ...provider.p, apiKey: ["sk-ant-VERYSECRET-0003"] } } },
      "configuration key providers.p.apiKey:"
    ],
    [{ providers: { p: { ...provider.p, headers: { "x-token": 7, "x-key": ["VERYSECRET-0005"] } } } }, "headers"],
    [{ storage: { url: "postgres://u:VERYSECRET-0006@db/x" } }, "configuration key storage"]
  ])("never print a secret written in the wrong shape, only where it is and what it should be (%j)", (raw, start) => {
    const message = problem(raw)
    expect(message).toContain(start)
    expect(message).not.toContain("VERYSECRET")
  })

  it("never print a secret that came from the environment", () => {
    const raw = { keys: ["${SECRET_ENV_KEY}"] }
    let message = ""
    try {
      decode(raw, { SECRET_ENV_KEY: "sk-from-env-VERYSECRET-0004" })
    } catch (error) {
      message = (error as ConfigError).message
    }
    expect(message).toContain("configuration key keys[0]")
    expect(message).not.toContain("VERYSECRET")
  })

  it("still show a value that is no secret, to say what was wrong", () => {
    expect(problem({ providers: { p: { kind: "anthropc", baseUrl: "https://x" } } })).toContain("anthropc")
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
