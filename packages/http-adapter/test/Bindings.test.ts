import { HttpApp } from "@effect/platform"
import { afterAll, describe, expect, it } from "@effect/vitest"
import {
  BatchService,
  Catalogue,
  EndpointStats,
  InternChat,
  InternService,
  Keys,
  MessagesService,
  OpenAiService,
  SpeechService,
  UsageLog
} from "@model-gateway/core"
import { Context, Effect, Layer, ManagedRuntime, Option } from "effect"
import { createServer, type RequestListener } from "node:http"
import type { AddressInfo } from "node:net"
import * as FetchBinding from "../src/FetchBinding.js"
import type { GatewayRequest, Handler, HandlerRequirements } from "../src/GatewayHttp.js"
import * as GatewayHttp from "../src/GatewayHttp.js"
import * as HttpAppBinding from "../src/HttpAppBinding.js"
import * as NodeBinding from "../src/NodeBinding.js"

// Each binding describes a request the same way: method, path without the mount prefix or the query, and the raw
// query string (what the route table parses). The node and fetch bindings answer a handler that dies the same way.

const runtime = ManagedRuntime.make(Layer.empty) as unknown as ManagedRuntime.ManagedRuntime<HandlerRequirements, never>
afterAll(() => runtime.dispose())

/** Answers with the request's description. */
const describeRequest: Handler = (request: GatewayRequest) =>
  Effect.succeed({
    status: 200,
    headers: { "content-type": "application/json" },
    body: {
      _tag: "Text",
      text: JSON.stringify({ method: request.method, path: request.path, query: request.query })
    }
  })

const cases = [
  ["/gw/v1/batches?limit=5&status=a&status=b", {
    method: "GET",
    path: "/v1/batches",
    query: "limit=5&status=a&status=b"
  }],
  ["/gw/v1/batches/b%201", { method: "GET", path: "/v1/batches/b%201", query: "" }]
] as const

/** Serves `listener` on a free port for the time of `use`, given the server's URL. */
const serving = async (listener: RequestListener, use: (url: string) => Promise<void>) => {
  const server = createServer(listener)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  try {
    await use(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
  } finally {
    await new Promise((resolve) => server.close(resolve))
  }
}

describe("bindings", () => {
  it("node:http: path without the mount prefix, and the raw query", () =>
    serving(NodeBinding.makeListener(runtime, describeRequest, { mountPath: "/gw" }), async (url) => {
      for (const [target, expected] of cases) {
        expect(await (await fetch(`${url}${target}`)).json()).toEqual(expected)
      }
    }))

  it("fetch: path without the mount prefix, and the raw query", async () => {
    const handler = FetchBinding.makeFetchHandler(runtime, describeRequest, { mountPath: "/gw" })
    for (const [target, expected] of cases) {
      expect(await (await handler(new Request(`http://x${target}`))).json()).toEqual(expected)
    }
  })

  it("HttpApp: path without the mount prefix, and the raw query", async () => {
    const handler = HttpApp.toWebHandlerRuntime(await runtime.runtime())(
      HttpAppBinding.make(describeRequest, { mountPath: "/gw" })
    )
    for (const [target, expected] of cases) {
      expect(await (await handler(new Request(`http://x${target}`))).json()).toEqual(expected)
    }
  })
})

describe("a handler that dies (a defect escaped it)", () => {
  const KEY = "mg-test-key"
  /** The request ids the use cases were given before they died: the ids the gateway answers with. */
  const given: Array<string> = []
  const die = (context: MessagesService.RequestContext) => {
    given.push(context.requestId)
    return Effect.die(new Error("boom"))
  }
  const services = Context.make(Keys.Keys, {
    authenticate: () => Effect.succeed(Option.some({ keyId: "k", workspace: "w", management: false, interns: false })),
    provision: () => Effect.die("not in this test"),
    revoke: () => Effect.die("not in this test"),
    list: Effect.die("not in this test"),
    sync: () => Effect.die("not in this test")
  }).pipe(
    Context.add(UsageLog.UsageLog, { record: () => Effect.void, flush: Effect.void, list: () => Effect.succeed([]) }),
    Context.add(MessagesService.MessagesService, { create: die, countTokens: die }),
    Context.add(OpenAiService.OpenAiService, { create: (_api, context) => die(context) }),
    // Services of routes these tests do not call.
    Context.add(Catalogue.Catalogue, {} as Catalogue.CatalogueService),
    Context.add(SpeechService.SpeechService, {} as SpeechService.SpeechServiceShape),
    Context.add(EndpointStats.EndpointStats, {} as EndpointStats.EndpointStatsService),
    Context.add(InternService.Interns, {} as InternService.InternsShape),
    Context.add(InternChat.InternChat, {} as InternChat.InternChatShape),
    Context.add(BatchService.Batches, {} as BatchService.BatchesShape)
  )
  const gateway = ManagedRuntime.make(Layer.succeedContext(services))
  afterAll(() => gateway.dispose())
  const handler = GatewayHttp.makeHandler()

  const ask = (path: string) =>
    new Request(`http://x/gw${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "Hi" }] })
    })

  /** Checks a last-resort answer: a 500 in the family's body, with the id the use case was given (header and body). */
  const expectInternalError = async (response: Response, family: "messages" | "openai") => {
    expect(response.status).toBe(500)
    const id = given.at(-1)!
    expect(id).toMatch(/^req_[0-9a-f]{32}$/)
    expect(response.headers.get("request-id")).toBe(id)
    expect(response.headers.get("content-type")).toBe("application/json")
    expect(await response.json()).toEqual(
      family === "messages"
        ? { type: "error", error: { type: "api_error", message: "Internal error" }, request_id: id }
        : {
          error: {
            code: 500,
            message: "Internal error",
            type: "server_error",
            param: null,
            metadata: { reason: "internal_error", retryable: true }
          }
        }
    )
  }

  const routes = [
    ["/v1/messages", "messages"],
    ["/v1/messages/count_tokens", "messages"],
    ["/v1/chat/completions", "openai"],
    ["/v1/responses", "openai"]
  ] as const

  it("node:http: a 500 in the error body of the route's family, with the request's id", () =>
    serving(NodeBinding.makeListener(gateway, handler, { mountPath: "/gw" }), async (url) => {
      for (const [path, family] of routes) {
        const request = ask(path)
        const response = await fetch(`${url}/gw${path}`, {
          method: "POST",
          headers: request.headers,
          body: await request.text()
        })
        await expectInternalError(response, family)
      }
    }))

  it("fetch: the same", async () => {
    const fetchHandler = FetchBinding.makeFetchHandler(gateway, handler, { mountPath: "/gw" })
    for (const [path, family] of routes) await expectInternalError(await fetchHandler(ask(path)), family)
  })

  it("fetch: a request aborted before its answer is told to the handler's `abandoned`, with its id and progress", async () => {
    const told: Array<{ readonly requestId: string; readonly request: GatewayRequest }> = []
    const waiting: Handler = Object.assign(() => Effect.never, {
      abandoned: (request: GatewayRequest, requestId: string) => Effect.sync(() => told.push({ request, requestId }))
    })
    const controller = new AbortController()
    const answer = FetchBinding.makeFetchHandler(runtime, waiting)(
      new Request("http://x/v1/messages", { method: "POST", body: "{}", signal: controller.signal })
    )
    controller.abort()
    await expect(answer).rejects.toThrow()
    await expect.poll(() => told.length).toBe(1)
    expect(told[0].requestId).toMatch(/^req_[0-9a-f]{32}$/)
    expect(told[0].request.requestId).toBe(told[0].requestId)
    expect(told[0].request.progress?.answered).toBe(false)
  })

  it("a handler that is not the gateway's: the generic body, with a request id in its header", async () => {
    const dying: Handler = () => Effect.die(new Error("boom"))
    const response = await FetchBinding.makeFetchHandler(runtime, dying)(new Request("http://x/v1/messages"))
    expect(response.status).toBe(500)
    const id = response.headers.get("request-id")
    expect(id).toMatch(/^req_[0-9a-f]{32}$/)
    expect(await response.json()).toEqual({
      error: { code: 500, message: "Internal error", metadata: { reason: "internal_error", retryable: true } }
    })
  })
})
