import { describe, expect, it } from "@effect/vitest"
import { healingFailed } from "../../src/plugins/ResponseHealer.js"

describe("healingFailed", () => {
  it("lists what failed in the message", () => {
    const error = healingFailed("schema_violation", ["/ must have required property 'a'", "/b must be string"])
    expect(error._tag).toBe("HealingFailed")
    expect(error.reason).toBe("schema_violation")
    expect(error.message).toBe(
      "the answer does not satisfy the requested JSON schema: / must have required property 'a'; /b must be string"
    )
    expect(healingFailed("unparseable", []).message).toBe("the answer is not parseable as JSON, even after repair")
  })
})
