import { describe, expect, it } from "@effect/vitest"
import { describe as describeError } from "../../src/errors/GatewayError.js"
import { notConfigured } from "../../src/plugins/WebSearch.js"

describe("WebSearch.notConfigured", () => {
  it("is a 400 that says no search provider is configured", () => {
    const error = notConfigured("web")
    expect(describeError(error)).toEqual({ status: 400, type: "invalid_request_error" })
    expect(error.message).toContain("no search provider is configured")
    expect(error.param).toBe("plugins")
    expect(notConfigured("web-fetch").message).toContain("'web-fetch' plugin needs a web fetch provider")
  })
})
