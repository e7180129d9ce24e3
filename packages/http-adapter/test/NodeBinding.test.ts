import { afterEach, describe, expect, it } from "@effect/vitest"
import { Push } from "@model-gateway/core"
import { Chunk, Effect, Layer, ManagedRuntime, Option, Stream } from "effect"
import { createServer, request as httpRequest, type Server } from "node:http"
import { type AddressInfo, connect, type Socket } from "node:net"
import type { GatewayRequest, Handler, HandlerRequirements } from "../src/GatewayHttp.js"
import * as NodeBinding from "../src/NodeBinding.js"

// The binding alone, with handlers written for each case: how bodies are read (ahead of the fiber or on demand),
// what a defect becomes, and what happens when the client goes away while its body is still arriving.

const runtime = ManagedRuntime.make(Layer.empty) as unknown as ManagedRuntime.ManagedRuntime<HandlerRequirements, never>
let server: Server | undefined

afterEach(async () => {
  await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())))
  server = undefined
})

const listen = async (handler: Handler, options: NodeBinding.NodeOptions = {}): Promise<string> => {
  server = createServer(NodeBinding.makeListener(runtime, handler, options))
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve))
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`
}

/** Answers with the size of the body it read, or the read's failure. */
const echoSize: Handler = (request: GatewayRequest) =>
  request.body.pipe(
    Effect.map((bytes) => ({
      status: 200,
      headers: { "content-type": "application/json" },
      body: { _tag: "Text" as const, text: JSON.stringify({ size: bytes.byteLength }) }
    })),
    Effect.catchAll((error) =>
      Effect.succeed({
        status: error._tag === "PayloadTooLarge" ? 413 : 400,
        headers: error._tag === "PayloadTooLarge"
          ? { "content-type": "application/json", connection: "close" } as Record<string, string>
          : { "content-type": "application/json" },
        body: { _tag: "Text" as const, text: JSON.stringify({ error: error.message }) }
      })
    )
  )

const post = async (url: string, body: string | Uint8Array, init: RequestInit = {}) => {
  const response = await fetch(`${url}/v1/messages`, { method: "POST", body, ...init })
  return { status: response.status, json: await response.json() as Record<string, unknown> }
}

describe("NodeBinding", () => {
  it("reads a small declared body, a body just past the read-ahead size, and a chunked body, whole", async () => {
    const url = await listen(echoSize)
    expect(await post(url, "x".repeat(10))).toEqual({ status: 200, json: { size: 10 } })
    expect(await post(url, "")).toEqual({ status: 200, json: { size: 0 } })
    const large = "y".repeat(256 * 1024 + 1)
    expect(await post(url, large)).toEqual({ status: 200, json: { size: large.length } })
    const chunks = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 4; i++) controller.enqueue(new TextEncoder().encode("z".repeat(1000)))
        controller.close()
      }
    })
    expect(await post(url, chunks as never, { duplex: "half" } as RequestInit)).toEqual({
      status: 200,
      json: { size: 4000 }
    })
  })

  it("enforces the body limit exactly, declared or not", async () => {
    const url = await listen(echoSize, { maxBodyBytes: 100 })
    expect((await post(url, "a".repeat(100))).status).toBe(200)
    expect((await post(url, "a".repeat(101))).status).toBe(413)
    const chunked = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array(60))
        controller.enqueue(new Uint8Array(60))
        controller.close()
      }
    })
    expect((await post(url, chunked as never, { duplex: "half" } as RequestInit)).status).toBe(413)
  })

  it("answers a body over the limit with the 413 that every fetch upload reads, never a broken pipe", async () => {
    const url = await listen(echoSize, { maxBodyBytes: 32 * 1024 * 1024 })
    const big = new Uint8Array(33 * 1024 * 1024)
    // Declared too large (answered before a byte is read) and chunked (answered once past the limit).
    const statuses: Array<number | string> = []
    for (let i = 0; i < 8; i++) {
      statuses.push(await post(url, big).then((r) => r.status, (e) => String(e.cause ?? e)))
    }
    expect(statuses).toEqual(Array(8).fill(413))
    const streamed = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.enqueue(new Uint8Array(1024 * 1024))
        if (++sent === 40) controller.close()
      }
    })
    let sent = 0
    expect((await post(url, streamed as never, { duplex: "half" } as RequestInit)).status).toBe(413)
  })

  it("closes a refused upload's connection after the linger time, however long the client goes on sending", async () => {
    const url = await listen(echoSize, { maxBodyBytes: 1000, lingerMs: 300 })
    const { port } = new URL(url)
    // A raw client that never stops its chunked upload and never closes: only the gateway can end this.
    const closed = await new Promise<{ head: string; after: number }>((resolve, reject) => {
      const socket = connect({ host: "127.0.0.1", port: Number(port) })
      let head = ""
      let answered = 0
      const chunk = `${(64 * 1024).toString(16)}\r\n${"x".repeat(64 * 1024)}\r\n`
      socket.write("POST /v1/messages HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n")
      const timer = setInterval(() => socket.writable && socket.write(chunk), 20)
      socket.on("data", (data) => {
        if (answered === 0) answered = Date.now()
        head += data.toString()
      })
      socket.on("error", () => {})
      socket.on("close", () => {
        clearInterval(timer)
        resolve({ head, after: Date.now() - answered })
      })
      setTimeout(() => reject(new Error("the connection stayed open")), 5000)
    })
    expect(closed.head).toMatch(/^HTTP\/1\.1 413 /)
    expect(closed.head).toMatch(/\r\nconnection: close\r\n/i)
    // It lingered (a close at once would be ~0 ms); the client may see the answer late on a loaded machine.
    expect(closed.after).toBeGreaterThanOrEqual(150)
    expect(closed.after).toBeLessThan(3000)
  })

  it("answers a defect with a 500 (a handler not the gateway's: the generic body), and keeps serving", async () => {
    let calls = 0
    const ids: Array<string | undefined> = []
    const url = await listen((request) => {
      calls++
      ids.push(request.requestId)
      return calls === 1 ? Effect.die(new Error("boom")) : echoSize(request)
    })
    const failed = await fetch(`${url}/v1/messages`, { method: "POST", body: "{}" })
    expect(failed.status).toBe(500)
    // The id the binding gave the request, which the dispatcher would have answered with.
    expect(ids[0]).toMatch(/^req_[0-9a-f]{32}$/)
    expect(failed.headers.get("request-id")).toBe(ids[0])
    expect(await failed.json()).toEqual({
      error: { code: 500, message: "Internal error", metadata: { reason: "internal_error", retryable: true } }
    })
    expect(await post(url, "{}")).toEqual({ status: 200, json: { size: 2 } })
    expect(ids[1]).not.toBe(ids[0])
  })

  it("does not run the handler for a client that goes away before its small body has arrived", async () => {
    let calls = 0
    const url = await listen((request) => {
      calls++
      return echoSize(request)
    })
    const { port } = new URL(url)
    await new Promise<void>((resolve) => {
      const req = httpRequest({
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/v1/messages",
        headers: { "content-length": "1000" }
      })
      req.on("error", () => resolve())
      req.write("only part of the body", () => {
        req.destroy()
        setTimeout(resolve, 100)
      })
    })
    // The server is still healthy, and only the complete request reached the handler.
    expect(await post(url, "{}")).toEqual({ status: 200, json: { size: 2 } })
    expect(calls).toBe(1)
  })

  for (const form of ["pulls", "pushes", "stream"] as const) {
    it(`waits for a slow client before writing more (frames as ${form}), and loses nothing`, async () => {
      const CHUNKS = 400
      const frame = (i: number) => `data: ${String(i).padStart(6, "0")}${"x".repeat(64 * 1024)}\n\n`
      let pulled = 0
      const pull = Effect.sync(() => (pulled < CHUNKS ? Chunk.of(frame(pulled++)) : undefined))
      // Pushed: each frame as soon as the last was taken, waiting for the writer's resume when it asks to wait.
      const pushing = Push.pushable(pull, (write) =>
        Effect.async<void>((resume) => {
          const run = (): void => {
            while (pulled < CHUNKS) if (!write([frame(pulled++)], run)) return
            resume(Effect.void)
          }
          run()
        }))
      const open = Effect.succeed(form === "pushes" ? pushing : pull)
      const stream = Stream.repeatEffectOption(
        Effect.flatMap(pull, (chunk) => chunk === undefined ? Effect.fail(Option.none()) : Effect.succeed(chunk))
      ).pipe(Stream.flattenChunks)
      const url = await listen(() =>
        Effect.succeed({
          status: 200,
          headers: { "content-type": "text/event-stream" },
          body: form === "stream" ? { _tag: "Stream" as const, stream } : { _tag: "Stream" as const, stream, open }
        })
      )
      const { port } = new URL(url)
      const { pausedAt, text } = await new Promise<{ pausedAt: number; text: string }>((resolve, reject) => {
        const req = httpRequest({ host: "127.0.0.1", port, method: "POST", path: "/v1/messages" }, (res) => {
          res.pause()
          setTimeout(() => {
            const pausedAt = pulled
            const parts: Array<Buffer> = []
            res.on("data", (d: Buffer) => parts.push(d))
            res.on("end", () => resolve({ pausedAt, text: Buffer.concat(parts).toString() }))
            res.resume()
          }, 300)
        })
        req.on("error", reject)
        req.end()
      })
      // While the client did not read, the binding stopped pulling once the socket's buffers were full.
      expect(pausedAt).toBeLessThan(CHUNKS)
      expect(pulled).toBe(CHUNKS)
      expect(text).toBe(Array.from({ length: CHUNKS }, (_, i) => frame(i)).join(""))
    })
  }

  it("a client that goes away while frames are pushed: the push stops and its source is released", async () => {
    let released = false
    let written = 0
    let endPush: ((effect: Effect.Effect<void>) => void) | undefined
    const pull = Effect.succeed(Chunk.of("data: first\n\n"))
    // A source that pushes one frame every 10 ms, forever, until it is released.
    const pushing = Push.pushable(pull, (write) =>
      Effect.async<void>((resume) => {
        endPush = resume
        const timer = setInterval(() => {
          if (released) clearInterval(timer)
          else if (write([`data: ${written++}\n\n`], () => {})) return
        }, 10)
      }))
    const open = Effect.zipRight(
      Effect.addFinalizer(() => Effect.sync(() => (released = true))),
      Effect.succeed(pushing)
    )
    const url = await listen(() =>
      Effect.succeed({
        status: 200,
        headers: { "content-type": "text/event-stream" },
        body: { _tag: "Stream" as const, stream: Stream.empty, open }
      })
    )
    const { port } = new URL(url)
    const received = await new Promise<string>((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port, method: "POST", path: "/v1/messages" }, (res) => {
        let text = ""
        res.on("data", (d: Buffer) => {
          text += d.toString()
          if (text.includes("data: 3\n\n")) {
            req.destroy()
            resolve(text)
          }
        })
      })
      req.on("error", () => {})
      req.end()
      setTimeout(() => reject(new Error("no frames")), 5_000)
    })
    expect(received.startsWith("data: first\n\ndata: 0\n\n")).toBe(true)
    for (let i = 0; i < 100 && !released; i++) await new Promise((r) => setTimeout(r, 10))
    expect(released).toBe(true)
    expect(endPush).toBeDefined()
  })

  it("a stream whose head cannot be written is answered 500, not an empty 200", async () => {
    const url = await listen(() =>
      Effect.succeed({
        status: 200,
        headers: { "content-type": "text/event-stream", "x-bad": "a\nb" },
        body: { _tag: "Stream" as const, stream: Stream.empty, open: Effect.succeed(Effect.succeed(undefined)) }
      })
    )
    const response = await fetch(`${url}/v1/messages`, { method: "POST", body: "{}" })
    expect(response.status).toBe(500)
    expect(await response.json()).toMatchObject({ error: { code: 500, message: "Internal error" } })
  })

  describe("claimed frames (the use cases' streams)", () => {
    const claimed = (pushing: Effect.Effect<Chunk.Chunk<string> | undefined>, onRelease: () => void) =>
      Effect.succeed({ pull: pushing, release: Effect.sync(onRelease) })
    /** Serves `frames` claimed, as the use cases' streams are; `onRelease` counts their releases. */
    const listenClaimed = (frames: Effect.Effect<Chunk.Chunk<string> | undefined>, onRelease: () => void) =>
      listen(() =>
        Effect.succeed({
          status: 200,
          headers: { "content-type": "text/event-stream" },
          body: {
            _tag: "Stream" as const,
            stream: Stream.empty,
            open: Effect.die("the binding claims these frames"),
            claim: claimed(frames, onRelease)
          }
        })
      )

    it("a client that goes away while they are pushed: the push stops, they are released once", async () => {
      let releases = 0
      let written = 0
      const pushing = Push.pushable(Effect.succeed(Chunk.of("data: first\n\n")), (write) =>
        Effect.async<void>(() => {
          const timer = setInterval(() => {
            if (releases > 0) clearInterval(timer)
            else write([`data: ${written++}\n\n`], () => {})
          }, 10)
        }))
      const url = await listenClaimed(pushing, () => releases++)
      const { port } = new URL(url)
      const received = await new Promise<string>((resolve, reject) => {
        const req = httpRequest({ host: "127.0.0.1", port, method: "POST", path: "/v1/messages" }, (res) => {
          let text = ""
          res.on("data", (d: Buffer) => {
            text += d.toString()
            if (text.includes("data: 3\n\n")) {
              req.destroy()
              resolve(text)
            }
          })
        })
        req.on("error", () => {})
        req.end()
        setTimeout(() => reject(new Error("no frames")), 5_000)
      })
      expect(received.startsWith("data: first\n\ndata: 0\n\n")).toBe(true)
      for (let i = 0; i < 100 && releases === 0; i++) await new Promise((r) => setTimeout(r, 10))
      await new Promise((r) => setTimeout(r, 50))
      expect(releases).toBe(1)
    })

    /**
     * Serves the frames `push` writes after a first one, asks for them, and gives what the server's socket sent of the
     * body: one entry per system call (`_write` or `_writev`).
     */
    const bodyWrites = async (push: Push.Push<string, never>): Promise<Array<string>> => {
      const sent: Array<string> = []
      const record = (socket: Socket) => {
        const hooks = socket as unknown as {
          _write: (chunk: unknown, encoding: unknown, callback: unknown) => void
          _writev: (chunks: Array<{ chunk: unknown }>, callback: unknown) => void
        }
        const write = hooks._write
        const writev = hooks._writev
        hooks._write = function(chunk, encoding, callback) {
          sent.push(String(chunk))
          return write.call(this, chunk, encoding, callback)
        }
        hooks._writev = function(chunks, callback) {
          sent.push(chunks.map(({ chunk }) => String(chunk)).join(""))
          return writev.call(this, chunks, callback)
        }
      }
      const url = await listenClaimed(Push.pushable(Effect.succeed(Chunk.of("data: first\n\n")), push), () => {})
      server!.on("connection", record)
      const response = await fetch(`${url}/v1/messages`, { method: "POST", body: "{}" })
      expect(await response.text()).toBe("data: first\n\ndata: middle\n\ndata: end\n\n")
      expect(sent[0]).toContain("data: first")
      return sent.filter((text) => !text.startsWith("HTTP/1.1"))
    }

    it("the last frames and the body's end leave in one write; frames before them, each as it is pushed", async () => {
      // As the transport pushes: each read's frames in a callback of their own; the read holding the answer's end
      // says so, and the push ends in the same callback.
      const body = await bodyWrites((write) =>
        Effect.async<void>((resume) => {
          setTimeout(() => {
            write(["data: middle\n\n"], () => {})
            setTimeout(() => {
              write(["data: end\n\n"], () => {}, true)
              resume(Effect.void)
            }, 5)
          }, 5)
        })
      )
      expect(body).toHaveLength(2)
      expect(body[0]).toContain("data: middle")
      expect(body[0]).not.toContain("0\r\n\r\n")
      expect(body[1]).toContain("data: end\n\n")
      expect(body[1]!.endsWith("\r\n0\r\n\r\n")).toBe(true)
    })

    it("the last frames and the body's end leave in one write when frames before them came in the same callback", async () => {
      // One network read of the upstream holding two chunks of its chunked body: the transport hands on each in the
      // same callback, the first corking the socket by node's own cork (undone on the next tick, before the end).
      const body = await bodyWrites((write) =>
        Effect.async<void>((resume) => {
          setTimeout(() => {
            write(["data: middle\n\n"], () => {})
            write(["data: end\n\n"], () => {}, true)
            resume(Effect.void)
          }, 5)
        })
      )
      expect(body).toHaveLength(1)
      expect(body[0]).toContain("data: middle\n\n")
      expect(body[0]).toContain("data: end\n\n")
      expect(body[0]!.endsWith("\r\n0\r\n\r\n")).toBe(true)
    })

    it("written whole and released once; a head that cannot be written: released, and answered 500", async () => {
      let releases = 0
      const frames = Effect.succeed(Chunk.of("data: only\n\n"))
      let pulled = false
      const pull = Effect.suspend(() => (pulled ? Effect.succeed(undefined) : ((pulled = true), frames)))
      let badHead = false
      const url = await listen(() =>
        Effect.succeed({
          status: 200,
          headers: { "content-type": "text/event-stream", ...(badHead ? { "x-bad": "a\nb" } : {}) },
          body: {
            _tag: "Stream" as const,
            stream: Stream.empty,
            open: Effect.die("the binding claims these frames"),
            claim: claimed(pull, () => releases++)
          }
        })
      )
      const good = await fetch(`${url}/v1/messages`, { method: "POST", body: "{}" })
      expect(good.status).toBe(200)
      expect(await good.text()).toBe("data: only\n\n")
      expect(releases).toBe(1)

      badHead = true
      pulled = false
      const bad = await fetch(`${url}/v1/messages`, { method: "POST", body: "{}" })
      expect(bad.status).toBe(500)
      expect(await bad.json()).toMatchObject({ error: { code: 500, message: "Internal error" } })
      expect(releases).toBe(2)
    })
  })
})
