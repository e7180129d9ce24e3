import { HttpApp } from "@effect/platform"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer, ManagedRuntime } from "effect"
import { createServer, request as httpRequest } from "node:http"
import type { AddressInfo } from "node:net"
import * as FetchBinding from "../src/FetchBinding.js"
import type { Handler, HandlerRequirements } from "../src/GatewayHttp.js"
import * as HttpAppBinding from "../src/HttpAppBinding.js"
import type { BytePull, GatewayResponse } from "../src/HttpTypes.js"
import * as NodeBinding from "../src/NodeBinding.js"

// A `Bytes` body in each binding: written as it arrives, a failure after the start is a broken answer (never a
// complete-looking one), and a client that goes away releases the source.

const runtime = ManagedRuntime.make(Layer.empty) as unknown as ManagedRuntime.ManagedRuntime<HandlerRequirements, never>
afterAll(() => runtime.dispose())

interface Source {
  readonly handler: Handler
  /** Times the source was released (its scope closed). */
  readonly released: () => number
}

/**
 * A handler answering with the chunks in order; before each chunk after the first, `gate(i)` is awaited (a test holds
 * the second chunk back until the client has the first). `fail` fails the pull after the chunks.
 */
const source = (
  chunks: ReadonlyArray<Uint8Array>,
  options: { readonly gate?: (i: number) => Promise<void>; readonly fail?: boolean } = {}
): Source => {
  let released = 0
  const handler: Handler = () =>
    Effect.succeed<GatewayResponse>({
      status: 200,
      headers: { "content-type": "audio/mpeg", "x-generation-id": "gen-1" },
      body: {
        _tag: "Bytes",
        open: Effect.acquireRelease(
          Effect.sync(() => {
            let i = 0
            const pull: BytePull = Effect.suspend(() => {
              const at = i++
              if (at < chunks.length) {
                const gate = at > 0 ? options.gate?.(at) : undefined
                return gate === undefined
                  ? Effect.succeed(chunks[at])
                  : Effect.as(Effect.promise(() => gate), chunks[at])
              }
              return options.fail === true ? Effect.fail("cut short") : Effect.succeed(undefined)
            })
            return pull
          }),
          () => Effect.sync(() => void released++)
        )
      }
    })
  return { handler, released: () => released }
}

const bytes = (...values: Array<number>) => new Uint8Array(values)

const concat = (parts: ReadonlyArray<Uint8Array>) => Array.from(parts.flatMap((p) => Array.from(p)))

const listen = async (handler: Handler) => {
  const server = createServer(NodeBinding.makeListener(runtime, handler))
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(resolve)) }
}

/** Reads a web body chunk by chunk. */
const readAll = async (body: ReadableStream<Uint8Array>) => {
  const reader = body.getReader()
  const parts: Array<Uint8Array> = []
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return parts
    parts.push(value)
  }
}

const waitFor = async (condition: () => boolean, ms = 2000) => {
  const until = Date.now() + ms
  while (!condition()) {
    if (Date.now() > until) throw new Error("timed out waiting")
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe("a Bytes body", () => {
  it("node:http: the bytes, in order, each chunk before the next is produced", async () => {
    let clientHasFirst: () => void = () => {}
    const first = new Promise<void>((resolve) => {
      clientHasFirst = resolve
    })
    const src = source([bytes(1, 2, 3), bytes(4, 5)], { gate: () => first })
    const { close, url } = await listen(src.handler)
    try {
      const response = await fetch(`${url}/speech`)
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("content-type"), "audio/mpeg")
      assert.strictEqual(response.headers.get("x-generation-id"), "gen-1")
      const reader = response.body!.getReader()
      const one = await reader.read()
      // The second chunk is only produced once the client holds the first: nothing was buffered whole.
      assert.deepStrictEqual(Array.from(one.value!), [1, 2, 3])
      clientHasFirst()
      const rest: Array<Uint8Array> = []
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        rest.push(value)
      }
      assert.deepStrictEqual(concat(rest), [4, 5])
      await waitFor(() => src.released() === 1)
    } finally {
      await close()
    }
  })

  it("node:http: a failure after the start breaks the answer (no terminating chunk)", async () => {
    const src = source([bytes(1, 2)], { fail: true })
    const { close, url } = await listen(src.handler)
    try {
      const response = await fetch(`${url}/speech`)
      assert.strictEqual(response.status, 200)
      let error: unknown
      try {
        await readAll(response.body!)
      } catch (e) {
        error = e
      }
      assert.isDefined(error, "reading a cut-short body must fail")
      await waitFor(() => src.released() === 1)
    } finally {
      await close()
    }
  })

  it("node:http: a client that goes away releases the source", async () => {
    const never = new Promise<void>(() => {})
    const src = source([bytes(1), bytes(2)], { gate: () => never })
    const { close, url } = await listen(src.handler)
    try {
      await new Promise<void>((resolve, reject) => {
        const req = httpRequest(`${url}/speech`, (res) => {
          res.once("data", () => {
            req.destroy()
            resolve()
          })
        })
        req.on("error", () => {})
        req.on("close", () => resolve())
        req.end()
        setTimeout(() => reject(new Error("no data")), 2000)
      })
      await waitFor(() => src.released() === 1)
    } finally {
      await close()
    }
  })

  it("node:http: back-pressure: a large body arrives whole through a slow reader", async () => {
    const chunk = new Uint8Array(256 * 1024).fill(7)
    const src = source(Array.from({ length: 16 }, () => chunk))
    const { close, url } = await listen(src.handler)
    try {
      const response = await fetch(`${url}/speech`)
      const reader = response.body!.getReader()
      let total = 0
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        total += value.byteLength
        await new Promise((resolve) => setTimeout(resolve, 1))
      }
      assert.strictEqual(total, 16 * 256 * 1024)
    } finally {
      await close()
    }
  })

  it("fetch: the bytes as a stream; a failure errors it", async () => {
    const ok = FetchBinding.makeFetchHandler(runtime, source([bytes(1), bytes(2, 3)]).handler)
    const response = await ok(new Request("http://x/speech"))
    assert.strictEqual(response.headers.get("content-type"), "audio/mpeg")
    assert.deepStrictEqual(concat(await readAll(response.body!)), [1, 2, 3])
    const broken = FetchBinding.makeFetchHandler(runtime, source([bytes(1)], { fail: true }).handler)
    const failing = await broken(new Request("http://x/speech"))
    let error: unknown
    try {
      await readAll(failing.body!)
    } catch (e) {
      error = e
    }
    assert.isDefined(error)
  })

  it("fetch: cancelling the body releases the source", async () => {
    const gate = Effect.runSync(Deferred.make<void>())
    const src = source([bytes(1), bytes(2)], { gate: () => Effect.runPromise(Deferred.await(gate)) })
    const response = await FetchBinding.makeFetchHandler(runtime, src.handler)(new Request("http://x/speech"))
    const reader = response.body!.getReader()
    await reader.read()
    await reader.cancel()
    await waitFor(() => src.released() === 1)
  })

  it("HttpApp: the bytes", async () => {
    const handler = HttpApp.toWebHandlerRuntime(await runtime.runtime())(
      HttpAppBinding.make(source([bytes(9), bytes(8)]).handler)
    )
    const response = await handler(new Request("http://x/speech"))
    assert.strictEqual(response.headers.get("content-type"), "audio/mpeg")
    assert.deepStrictEqual(concat(await readAll(response.body!)), [9, 8])
  })
})
