import { LocalSpeech } from "@model-gateway/provider-adapters"
import { Option, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { configFor } from "../src/BuiltinCatalogue.js"

const none = { anthropic: Option.none(), openai: Option.none(), openrouter: Option.none() }

describe("the built-in catalogue", () => {
  it("offers the local speech engine when its optional package is installed, as it is here", () => {
    expect(LocalSpeech.installed()).toBe(true)
    const config = configFor(none)
    expect(Object.keys(config.models)).toEqual(["local/espeak-ng"])
    expect(Object.keys(config.providers)).toEqual(["local"])
  })

  it("leaves it out when espeak-ng is not installed (npm install --omit=optional)", () => {
    const config = configFor(none, false)
    expect(config.models).toEqual({})
    expect(config.providers).toEqual({})
  })

  it("adds each provider's popular models for the keys given", () => {
    const config = configFor({ ...none, openai: Option.some(Redacted.make("sk-test")) }, false)
    expect(Object.keys(config.models)).toEqual([
      "openai/gpt-4.1",
      "openai/gpt-4o-mini",
      "openai/tts-1",
      "openai/tts-1-hd"
    ])
  })
})
