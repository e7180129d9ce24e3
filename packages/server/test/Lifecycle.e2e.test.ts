/** The gateway's resources live as long as it does: shutting it down closes its upstream connection pools. */
import { expect, it } from "vitest"
import { post, startHarness } from "./harness.js"

const eventually = async (check: () => boolean, ms = 2000) => {
  const deadline = Date.now() + ms
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  return check()
}

it("closes the upstream connection pools when the gateway shuts down", async () => {
  const h = await startHarness()
  try {
    for (const model of ["anthro/claude", "acme/gpt"]) {
      const response = await post(h, { model, max_tokens: 5, messages: [{ role: "user", content: "hi" }] })
      expect(response.status).toBe(200)
    }
    // Keep-alive: the pools hold their connections open after the answers.
    expect(h.anthropic.connections()).toBeGreaterThan(0)
    expect(h.openai.connections()).toBeGreaterThan(0)
    await h.gateway.close(1000)
    expect(await eventually(() => h.anthropic.connections() === 0 && h.openai.connections() === 0)).toBe(true)
  } finally {
    await h.close()
  }
})
