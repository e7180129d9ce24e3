import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Moderation } from "@model-gateway/core"
import { Effect, Either } from "effect"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import * as OpenAiModeration from "../../src/plugins/OpenAiModeration.js"

interface Seen {
  readonly url: string | undefined
  readonly authorization: string | undefined
  readonly body: { input: Array<string>; model?: string }
}

let server: Server
let baseUrl: string
const seen: Array<Seen> = []
let mode: "ok" | "error" | "garbage" | "short" = "ok"

beforeAll(async () => {
  server = createServer((req, res) => {
    let text = ""
    req.on("data", (chunk) => (text += chunk))
    req.on("end", () => {
      const body = JSON.parse(text) as Seen["body"]
      seen.push({ url: req.url, authorization: req.headers.authorization, body })
      if (mode === "error") {
        res.writeHead(500, { "content-type": "application/json" })
        return res.end(JSON.stringify({ error: { message: "boom", type: "server_error" } }))
      }
      if (mode === "garbage") {
        res.writeHead(200, { "content-type": "application/json" })
        return res.end(JSON.stringify({ nothing: true }))
      }
      const input = mode === "short" ? body.input.slice(1) : body.input
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({
        id: "modr-1",
        model: body.model ?? "omni-moderation-latest",
        results: input.map((text) => {
          const violent = text.includes("attack")
          const hateful = text.includes("hate")
          return {
            flagged: violent || hateful,
            categories: { violence: violent, hate: hateful, "self-harm": false },
            category_scores: { violence: violent ? 0.9 : 0.01, hate: hateful ? 0.8 : 0.01, "self-harm": 0 }
          }
        })
      }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/`
})

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

const check = (service: Moderation.ModerationService, input: ReadonlyArray<string>) =>
  Effect.runPromise(Effect.either(service.check(input)))

describe("OpenAiModeration", () => {
  it("passes clean input and sends model, input and key", async () => {
    mode = "ok"
    seen.length = 0
    const service = OpenAiModeration.make({ baseUrl, apiKey: "sk-test", model: "omni-moderation-latest" })
    const result = await check(service, ["hello", "", "how are you"])
    expect(result).toEqual(Either.right({ flagged: false, categories: [] }))
    expect(seen).toEqual([{
      url: "/v1/moderations",
      authorization: "Bearer sk-test",
      body: { input: ["hello", "how are you"], model: "omni-moderation-latest" }
    }])
  })

  it("flags input and names the categories, across batches", async () => {
    mode = "ok"
    seen.length = 0
    const service = OpenAiModeration.make({ baseUrl, maxBatch: 2 })
    const verdict = await Effect.runPromise(service.check(["fine", "plan an attack", "ok", "I hate this", "bye"]))
    expect(verdict).toEqual({
      flagged: true,
      categories: ["violence", "hate"],
      reason: "flagged by the moderation service"
    })
    expect(seen.map((s) => s.body.input)).toEqual([["fine", "plan an attack"], ["ok", "I hate this"], ["bye"]])
    expect(seen[0].body.model).toBeUndefined()
    expect(seen[0].authorization).toBeUndefined()
  })

  it("does not call the service for empty input", async () => {
    seen.length = 0
    const service = OpenAiModeration.make({ baseUrl })
    expect(await Effect.runPromise(service.check([]))).toEqual({ flagged: false, categories: [] })
    expect(seen).toEqual([])
  })

  it("is unavailable on an error status, an unexpected body, or no server", async () => {
    const service = OpenAiModeration.make({ baseUrl })
    for (const m of ["error", "garbage", "short"] as const) {
      mode = m
      const result = await check(service, ["a", "b"])
      expect(result._tag).toBe("Left")
      if (result._tag === "Left") expect(result.left).toBeInstanceOf(Moderation.ModerationUnavailable)
    }
    mode = "error"
    const error = await Effect.runPromise(Effect.flip(service.check(["a"])))
    expect(error.message).toContain("(500): boom")
    const down = OpenAiModeration.make({ baseUrl: "http://127.0.0.1:1/v1", timeouts: { connectMs: 1000 } })
    expect((await check(down, ["a"]))._tag).toBe("Left")
  })

  it("provides the port as a layer", async () => {
    mode = "ok"
    const verdict = await Effect.runPromise(
      Effect.flatMap(Moderation.Moderation, (m) => m.check(["attack"])).pipe(
        Effect.provide(OpenAiModeration.layer({ baseUrl }))
      )
    )
    expect(verdict.flagged).toBe(true)
  })
})
