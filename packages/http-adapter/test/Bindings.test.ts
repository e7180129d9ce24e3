import { HttpApp } from "@effect/platform"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime } from "effect"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as FetchBinding from "../src/FetchBinding.js"
import type { GatewayRequest, Handler, HandlerRequirements } from "../src/GatewayHttp.js"
import * as HttpAppBinding from "../src/HttpAppBinding.js"
import * as NodeBinding from "../src/NodeBinding.js"

// Each binding describes a request the same way: method, path without the mount prefix or the query, and the raw
// query string (what the route table parses).

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

describe("bindings", () => {
  it("node:http: path without the mount prefix, and the raw query", async () => {
    const server = createServer(NodeBinding.makeListener(runtime, describeRequest, { mountPath: "/gw" }))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    try {
      for (const [target, expected] of cases) {
        expect(await (await fetch(`${url}${target}`)).json()).toEqual(expected)
      }
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })

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
