import { assert, describe, it } from "@effect/vitest"
import type { MessagesService } from "@model-gateway/core"
import {
  BatchService,
  Catalogue,
  EndpointStats,
  GatewayError,
  InternChat,
  InternService,
  Keys,
  MessagesService as Messages,
  OpenAiService,
  SpeechService,
  UsageLog
} from "@model-gateway/core"
import { Context, Effect, Option, TestClock } from "effect"
import * as ApiKeys from "../src/ApiKeys.js"
import * as GatewayHttp from "../src/GatewayHttp.js"
import type { GatewayRequest, GatewayResponse } from "../src/HttpTypes.js"
import * as RouteDispatcher from "../src/RouteDispatcher.js"
import * as RouteTable from "../src/RouteTable.js"

// The route table and its dispatcher with handlers written for the tests, an in-test key store and usage log: what
// matches, what each family's 404/405 looks like, who may call what, and which refusals are recorded.

const MANAGEMENT_KEY = "mg-management"
const TEAM_KEY = "mg-team"

const principals = new Map<string, Keys.Principal>([
  [ApiKeys.digest(MANAGEMENT_KEY), { keyId: "mgmt", workspace: "default", management: true, interns: false }],
  [ApiKeys.digest(TEAM_KEY), { keyId: "team", workspace: "team-b", management: false, interns: false }]
])

const keys: Keys.KeysService = {
  authenticate: (digest) => Effect.succeed(Option.fromNullable(principals.get(digest))),
  provision: () => Effect.die("not in this test"),
  revoke: () => Effect.die("not in this test"),
  list: Effect.die("not in this test"),
  sync: () => Effect.die("not in this test")
}

/** A usage log that keeps what it is given. */
const usageLog = () => {
  const records: Array<UsageLog.UsageRecord> = []
  const service: UsageLog.UsageLogService = {
    record: (record) => Effect.sync(() => void records.push(record)),
    flush: Effect.void,
    list: () => Effect.succeed(records)
  }
  return { records, service }
}

/** Answers with what the handler was given. */
const echo = (request: RouteTable.RouteRequest & { readonly principal?: Keys.Principal }) =>
  Effect.succeed<GatewayResponse>({
    status: 200,
    headers: { "content-type": "application/json" },
    body: {
      _tag: "Text",
      text: JSON.stringify({
        route: request.route,
        params: request.params,
        query: request.query,
        body: request.body,
        bodyBytes: request.bodyBytes,
        sessionId: request.sessionId,
        workspace: request.principal?.workspace ?? null
      })
    }
  })

const routes: ReadonlyArray<RouteTable.Route> = [
  { method: "GET", path: "/health", access: "public", family: "generic", handler: echo },
  {
    method: "POST",
    path: "/v1/messages",
    access: "key",
    family: "messages",
    body: "json",
    session: true,
    handler: echo
  },
  { method: "POST", path: "/v1/chat/completions", access: "key", family: "openai", body: "json", handler: echo },
  { method: "GET", path: "/v1/batches", access: "key", family: "generic", handler: echo },
  { method: "GET", path: "/v1/batches/{id}", access: "key", family: "generic", handler: echo },
  { method: "DELETE", path: "/v1/batches/{id}", access: "key", family: "generic", handler: echo },
  { method: "POST", path: "/v1/batches/{id}/cancel", access: "key", family: "generic", handler: echo },
  { method: "GET", path: "/v1/models/{author}/{slug}/endpoints", access: "public", family: "generic", handler: echo },
  { method: "GET", path: "/v1/endpoints/zdr", access: "management", family: "generic", handler: echo },
  {
    method: "GET",
    path: "/v1/interns/{id}",
    access: "key",
    family: "generic",
    handler: (request) => Effect.fail(new GatewayError.NotFound({ message: `No intern ${request.params.id}` }))
  }
]

const handler = RouteDispatcher.make(RouteTable.make(routes))

const encoder = new TextEncoder()

const request = (
  method: string,
  url: string,
  options: { key?: string; headers?: Record<string, string>; body?: GatewayRequest["body"] | string } = {}
): GatewayRequest => {
  const q = url.indexOf("?")
  const body = options.body ?? ""
  return {
    method,
    path: q === -1 ? url : url.slice(0, q),
    query: q === -1 ? "" : url.slice(q + 1),
    headers: {
      ...(options.key === undefined ? {} : { authorization: `Bearer ${options.key}` }),
      ...(typeof body === "string" ? { "content-type": "application/json" } : {}),
      ...options.headers
    },
    body: typeof body === "string" ? Effect.succeed(encoder.encode(body)) : body
  }
}

/** Sends a request through the dispatcher; the answer's JSON body, and what was recorded. */
const send = (req: GatewayRequest) =>
  Effect.gen(function*() {
    const log = usageLog()
    const response = yield* handler(req).pipe(
      Effect.provideService(Keys.Keys, keys),
      Effect.provideService(UsageLog.UsageLog, log.service)
    )
    assert.strictEqual(response.body._tag, "Text")
    const text = response.body._tag === "Text" ? response.body.text : ""
    return { status: response.status, headers: response.headers, json: JSON.parse(text), records: log.records }
  })

describe("RouteTable", () => {
  it.effect("matches path parameters, decoded, and parses the query, a repeated key as an array", () =>
    Effect.gen(function*() {
      const list = yield* send(request("GET", "/v1/batches?limit=5&status=failed&status=expired", { key: TEAM_KEY }))
      assert.strictEqual(list.status, 200)
      assert.deepStrictEqual(list.json.query, { limit: "5", status: ["failed", "expired"] })
      assert.strictEqual(list.json.route, "GET /v1/batches")
      assert.strictEqual(list.json.workspace, "team-b")
      const one = yield* send(request("DELETE", "/v1/batches/batch%20one", { key: TEAM_KEY }))
      assert.deepStrictEqual(one.json.params, { id: "batch one" })
      assert.deepStrictEqual(one.json.query, {})
      assert.strictEqual(one.json.route, "DELETE /v1/batches/{id}")
      const cancel = yield* send(request("POST", "/v1/batches/b1/cancel", { key: TEAM_KEY }))
      assert.deepStrictEqual(cancel.json.params, { id: "b1" })
      const endpoints = yield* send(request("GET", "/v1/models/acme/gpt-4.1/endpoints"))
      assert.deepStrictEqual(endpoints.json.params, { author: "acme", slug: "gpt-4.1" })
    }))

  it.effect("tolerates a trailing slash, and matches case and slashes exactly", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* send(request("GET", "/v1/batches/", { key: TEAM_KEY }))).status, 200)
      const one = yield* send(request("GET", "/v1/batches/b1/", { key: TEAM_KEY }))
      assert.deepStrictEqual(one.json.params, { id: "b1" })
      assert.strictEqual((yield* send(request("GET", "/health/"))).status, 200)
      assert.strictEqual((yield* send(request("GET", "/V1/batches", { key: TEAM_KEY }))).status, 404)
      assert.strictEqual((yield* send(request("GET", "//v1/batches", { key: TEAM_KEY }))).status, 404)
    }))

  it.effect("answers an unknown path 404 in the body of the family the path belongs to, and records it", () =>
    Effect.gen(function*() {
      const messages = yield* send(request("POST", "/v1/messages/batches", { key: TEAM_KEY }))
      assert.strictEqual(messages.status, 404)
      assert.deepStrictEqual(messages.json, {
        type: "error",
        error: { type: "not_found_error", message: "No route for POST /v1/messages/batches" },
        request_id: messages.headers["request-id"]
      })
      const openai = yield* send(request("GET", "/v1/chat/nothing"))
      assert.deepStrictEqual(openai.json, {
        error: {
          code: 404,
          message: "No route for GET /v1/chat/nothing",
          type: "not_found_error",
          param: null,
          metadata: { reason: "not_found", retryable: false }
        }
      })
      for (const path of ["/v1/nothing", "/nothing", "/"]) {
        const generic = yield* send(request("GET", path))
        assert.strictEqual(generic.status, 404)
        assert.deepStrictEqual(generic.json, {
          error: {
            code: 404,
            message: `No route for GET ${path}`,
            metadata: { reason: "not_found", retryable: false }
          }
        })
      }
      assert.deepStrictEqual(openai.records.map((r) => [r.route, r.status, r.errorType, r.keyId]), [
        ["GET /v1/chat/nothing", 404, "not_found_error", null]
      ])
    }))

  it.effect("answers a known path with a wrong method 405 with Allow, in the path's family, and records it", () =>
    Effect.gen(function*() {
      const messages = yield* send(request("GET", "/v1/messages", { key: TEAM_KEY }))
      assert.strictEqual(messages.status, 405)
      assert.strictEqual(messages.headers.allow, "POST")
      assert.strictEqual(messages.json.type, "error")
      assert.strictEqual(messages.json.error.type, "invalid_request_error")
      assert.strictEqual(messages.json.request_id, messages.headers["request-id"])
      const openai = yield* send(request("DELETE", "/v1/chat/completions/"))
      assert.strictEqual(openai.status, 405)
      assert.strictEqual(openai.headers.allow, "POST")
      assert.deepStrictEqual(Object.keys(openai.json.error), ["code", "message", "type", "param"])
      assert.strictEqual(openai.json.error.code, 405)
      const generic = yield* send(request("PUT", "/v1/batches/b1"))
      assert.strictEqual(generic.status, 405)
      assert.strictEqual(generic.headers.allow, "GET, DELETE")
      assert.strictEqual(generic.json.error.code, 405)
      assert.strictEqual((yield* send(request("OPTIONS", "/v1/messages"))).status, 405)
      assert.deepStrictEqual(generic.records.map((r) => [r.route, r.status, r.keyId]), [[
        "PUT /v1/batches/{id}",
        405,
        null
      ]])
    }))

  it.effect("lets anyone call a public route, any valid key a key route, and management keys a management route", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* send(request("GET", "/health"))).status, 200)
      const missing = yield* send(request("GET", "/v1/batches"))
      assert.strictEqual(missing.status, 401)
      assert.match(missing.json.error.message, /^Missing API key/)
      const wrong = yield* send(request("GET", "/v1/batches", { key: "mg-nobody" }))
      assert.strictEqual(wrong.status, 401)
      assert.strictEqual(wrong.json.error.message, "Invalid API key")
      const viaHeader = yield* send(request("GET", "/v1/batches", { headers: { "x-api-key": TEAM_KEY } }))
      assert.strictEqual(viaHeader.status, 200)
      const team = yield* send(request("GET", "/v1/endpoints/zdr", { key: TEAM_KEY }))
      assert.strictEqual(team.status, 403)
      assert.deepStrictEqual(team.json, {
        error: { code: 403, message: "Only management keys can perform this operation" }
      })
      const management = yield* send(request("GET", "/v1/endpoints/zdr", { key: MANAGEMENT_KEY }))
      assert.strictEqual(management.status, 200)
      assert.strictEqual(management.json.workspace, "default")
    }))

  it.effect("answers 401 in each family's body", () =>
    Effect.gen(function*() {
      const messages = yield* send(request("POST", "/v1/messages", { body: "{}" }))
      assert.strictEqual(messages.json.error.type, "authentication_error")
      assert.strictEqual(messages.json.type, "error")
      const openai = yield* send(request("POST", "/v1/chat/completions", { key: "mg-nobody", body: "{}" }))
      assert.deepStrictEqual(openai.json, {
        error: {
          code: 401,
          message: "Invalid API key",
          type: "authentication_error",
          param: null,
          metadata: { openai_code: "invalid_api_key" }
        }
      })
    }))

  it.effect("reads the JSON body and the session id a route declares", () =>
    Effect.gen(function*() {
      const body = "{\"model\":\"m\",\"messages\":[]}"
      const ok = yield* send(
        request("POST", "/v1/messages", { key: TEAM_KEY, body, headers: { "x-session-id": "s1" } })
      )
      assert.strictEqual(ok.status, 200)
      assert.deepStrictEqual(ok.json.body, { model: "m", messages: [] })
      assert.strictEqual(ok.json.bodyBytes, body.length)
      assert.strictEqual(ok.json.sessionId, "s1")
      assert.deepStrictEqual(ok.records, [])
      const chat = yield* send(
        request("POST", "/v1/chat/completions", { key: TEAM_KEY, body, headers: { "x-session-id": "s1" } })
      )
      assert.strictEqual(chat.json.sessionId, undefined)
    }))

  it.effect("records each refusal before the handler: no key, not management, body too large, bad body, session id", () =>
    Effect.gen(function*() {
      const slowUpload = Effect.zipRight(
        TestClock.adjust("25 millis"),
        Effect.fail(new GatewayError.PayloadTooLarge({ message: "Request body exceeds the limit of 10 bytes" }))
      )
      const cases = [
        [request("POST", "/v1/messages", { body: "{}", headers: { "x-openrouter-title": "App" } }), 401, null],
        [request("GET", "/v1/endpoints/zdr", { key: TEAM_KEY }), 403, "team"],
        [request("POST", "/v1/messages", { key: TEAM_KEY, body: slowUpload }), 413, "team"],
        [request("POST", "/v1/messages", { key: TEAM_KEY, body: "{\"model\": " }), 400, "team"],
        [
          request("POST", "/v1/chat/completions", { key: TEAM_KEY, headers: { "content-type": "text/plain" } }),
          400,
          "team"
        ],
        [
          request("POST", "/v1/messages", { key: TEAM_KEY, body: "{}", headers: { "x-session-id": "s".repeat(257) } }),
          400,
          "team"
        ]
      ] as const
      const records: Array<UsageLog.UsageRecord> = []
      for (const [req, status, keyId] of cases) {
        const answer = yield* send(req)
        assert.strictEqual(answer.status, status)
        assert.strictEqual(answer.records.length, 1)
        const record = answer.records[0]
        assert.strictEqual(record.requestId, answer.headers["request-id"])
        assert.strictEqual(record.status, status)
        assert.strictEqual(record.keyId, keyId)
        records.push(record)
      }
      assert.deepStrictEqual(records.map((r) => r.route), [
        "POST /v1/messages",
        "GET /v1/endpoints/zdr",
        "POST /v1/messages",
        "POST /v1/messages",
        "POST /v1/chat/completions",
        "POST /v1/messages"
      ])
      assert.deepStrictEqual(records.map((r) => r.errorType), [
        "authentication_error",
        "permission_error",
        "invalid_request_error",
        "invalid_request_error",
        "invalid_request_error",
        "invalid_request_error"
      ])
      assert.deepStrictEqual(records.map((r) => r.latencyMs), [0, 0, 25, 0, 0, 0])
      assert.deepStrictEqual(records[0], {
        requestId: records[0].requestId,
        createdAt: 0,
        route: "POST /v1/messages",
        keyId: null,
        workspace: null,
        model: null,
        provider: null,
        endpointId: null,
        stream: false,
        status: 401,
        errorType: "authentication_error",
        inputTokens: 0,
        outputTokens: 0,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        cost: "0",
        latencyMs: 0,
        ttfbMs: null,
        attempts: 0,
        sessionId: null,
        user: null,
        appReferer: null,
        appTitle: "App",
        appCategories: null,
        metadata: null
      })
      assert.strictEqual(records[2].workspace, "team-b")
    }))

  it.effect("maps a handler's failure to its family's body without recording it (its use case does)", () =>
    Effect.gen(function*() {
      const answer = yield* send(request("GET", "/v1/interns/i1", { key: TEAM_KEY }))
      assert.strictEqual(answer.status, 404)
      assert.deepStrictEqual(answer.json, {
        error: { code: 404, message: "No intern i1", metadata: { reason: "not_found", retryable: false } }
      })
      assert.deepStrictEqual(answer.records, [])
    }))

  it("refuses a table with a route declared twice, a malformed pattern, or a path in two families", () => {
    const route = routes[3]
    assert.throws(() => RouteTable.make([route, route]), /declared twice/)
    assert.throws(() => RouteTable.make([{ ...route, path: "/v1/batch-{id}" }]), /whole segment/)
    assert.throws(() => RouteTable.make([{ ...route, path: "v1/batches" }]), /start with/)
    assert.throws(
      () => RouteTable.make([routes[4], { ...routes[5], path: "/v1/batches/{batchId}" }]),
      /name their parameters alike/
    )
    assert.throws(() => RouteTable.make([route, { ...route, method: "POST", family: "openai" }]), /error family/)
  })

  it("gives a path no route matches the family of the patterns sharing most of its leading segments", () => {
    const familyOf = (path: string) => RouteTable.familyOf(routes, path)
    assert.strictEqual(familyOf("/v1/messages/count_tokens"), "messages")
    assert.strictEqual(familyOf("/v1/chat"), "openai")
    assert.strictEqual(familyOf("/v1/batches/b1/results"), "generic")
    assert.strictEqual(familyOf("/v1/unknown"), "generic")
    assert.strictEqual(familyOf("/"), "generic")
  })
})

describe("GatewayHttp routes", () => {
  const messagesService = Messages.MessagesService.of({
    create: (context: MessagesService.RequestContext) =>
      Effect.succeed({ _tag: "Json" as const, body: { route: context.route, sessionId: context.sessionId ?? null } }),
    countTokens: () => Effect.succeed({ input_tokens: 3 })
  })
  const call = (basePath: string | undefined, req: GatewayRequest) =>
    GatewayHttp.makeHandler({ basePath })(req).pipe(
      Effect.provide(
        Context.make(Keys.Keys, keys).pipe(
          Context.add(UsageLog.UsageLog, usageLog().service),
          Context.add(Messages.MessagesService, messagesService),
          Context.add(Catalogue.Catalogue, Catalogue.fromSnapshot(Catalogue.makeSnapshot([]))),
          Context.add(OpenAiService.OpenAiService, { create: () => Effect.die("not called") }),
          Context.add(SpeechService.SpeechService, { synthesize: () => Effect.die("not a speech test") }),
          // Services of routes these tests do not call.
          Context.add(EndpointStats.EndpointStats, {} as EndpointStats.EndpointStatsService),
          Context.add(InternService.Interns, {} as InternService.InternsShape),
          Context.add(InternChat.InternChat, {} as InternChat.InternChatShape),
          Context.add(BatchService.Batches, {} as BatchService.BatchesShape)
        )
      ),
      Effect.map((response) => ({
        status: response.status,
        json: response.body._tag === "Text" ? JSON.parse(response.body.text) : undefined
      }))
    )

  it.effect("serves POST {base}/messages under the default or a configured base path, naming its route", () =>
    Effect.gen(function*() {
      const body = "{\"model\":\"m\",\"messages\":[]}"
      const v1 = yield* call(undefined, request("POST", "/v1/messages", { key: TEAM_KEY, body }))
      assert.deepStrictEqual(v1, { status: 200, json: { route: "POST /v1/messages", sessionId: null } })
      const api = yield* call("/api/", request("POST", "/api/messages/", { key: TEAM_KEY, body }))
      assert.deepStrictEqual(api.json, { route: "POST /api/messages", sessionId: null })
      assert.strictEqual((yield* call("/api", request("POST", "/v1/messages", { key: TEAM_KEY, body }))).status, 404)
      const root = yield* call("/", request("POST", "/messages", { key: TEAM_KEY, body }))
      assert.strictEqual(root.json.route, "POST /messages")
    }))

  it.effect("keeps /health and {base}/health public, for GET and HEAD", () =>
    Effect.gen(function*() {
      for (
        const [base, path] of [[undefined, "/health"], [undefined, "/v1/health"], ["/api", "/api/health"]] as const
      ) {
        assert.deepStrictEqual(yield* call(base, request("GET", path)), { status: 200, json: { status: "ok" } })
        assert.strictEqual((yield* call(base, request("HEAD", path))).status, 200)
      }
      assert.strictEqual((yield* call(undefined, request("POST", "/health"))).status, 405)
    }))
})
