/**
 * The upstream HTTP client on its own, against real `node:http` servers on 127.0.0.1: connections are reused, each time
 * limit fails with its phase, a connection that breaks mid-body is an error (never a silent end), an abort reaches the
 * upstream, and a paused reader holds the socket back.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { type AddressInfo, createServer as createNetServer, type Server as NetServer, type Socket } from "node:net"
import * as HttpClient from "../src/internal/HttpClient.js"

interface Result {
  readonly status: number
  readonly body: string
  readonly error: Error | undefined
}

const servers: Array<Server | NetServer> = []
const pools: Array<HttpClient.Pool> = []

afterEach(async () => {
  for (const pool of pools.splice(0)) pool.destroy()
  for (const server of servers.splice(0)) {
    if ("closeAllConnections" in server) server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

const serve = async (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
  const server = createServer((req, res) => {
    req.resume()
    req.on("end", () => handler(req, res))
  })
  let connections = 0
  server.on("connection", () => connections++)
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}/v1/messages`, connections: () => connections }
}

/**
 * A bare HTTP/1.1 server: `answer(socket, n)` for the n-th request on each connection (1, 2, ...); `requests` lists
 * those numbers in order of arrival. Requests are read whole (head and `content-length` bytes of body).
 */
const serveRaw = async (answer: (socket: Socket, n: number) => void) => {
  const requests: Array<number> = []
  const server = createNetServer((socket) => {
    let n = 0
    let buffered = ""
    socket.on("error", () => {})
    socket.on("data", (chunk) => {
      buffered += chunk.toString("latin1")
      for (;;) {
        const headEnd = buffered.indexOf("\r\n\r\n")
        if (headEnd < 0) return
        const length = Number(/content-length: (\d+)/i.exec(buffered.slice(0, headEnd))?.[1] ?? 0)
        if (buffered.length < headEnd + 4 + length) return
        buffered = buffered.slice(headEnd + 4 + length)
        requests.push(++n)
        answer(socket, n)
      }
    })
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}/v1/messages`, requests: () => requests }
}

const pool = (staleAfterMs?: number) => {
  const made = new HttpClient.Pool(undefined, undefined, undefined, staleAfterMs)
  pools.push(made)
  return made
}

const limits = { connectMs: 1_000, headersMs: 2_000, bodyMs: 2_000 }

/** Posts and collects the answer; `onConnect` gets the abort. */
const post = (
  p: HttpClient.Pool,
  url: string,
  options: Partial<typeof limits> & { onConnect?: (abort: (reason?: Error) => void) => void } = {}
) =>
  new Promise<Result>((resolve) => {
    let status = 0
    let body = ""
    HttpClient.post(p, HttpClient.targetOf(url), {
      headers: { "content-type": "application/json" },
      body: "{\"a\":1}",
      ...limits,
      ...options
    }, {
      onConnect: (abort) => options.onConnect?.(abort),
      onHeaders: (s) => {
        status = s
        return true
      },
      onData: (chunk) => {
        body += chunk.toString("utf8")
        return true
      },
      onComplete: () => resolve({ status, body, error: undefined }),
      onError: (error) => resolve({ status, body, error })
    })
  })

describe("HttpClient", () => {
  it("sends the body with its length and reuses one keep-alive connection for sequential requests", async () => {
    const seen: Array<string | undefined> = []
    const upstream = await serve((req, res) => {
      seen.push(req.headers["content-length"])
      res.end("{\"ok\":true}")
    })
    const p = pool()
    for (let i = 0; i < 20; i++) {
      const result = await post(p, upstream.url)
      expect(result).toEqual({ status: 200, body: "{\"ok\":true}", error: undefined })
    }
    expect(seen).toEqual(Array(20).fill("7"))
    expect(upstream.connections()).toBe(1)
  })

  it("no cap on connections in use: 300 requests are at the upstream at once, none queued in the pool", async () => {
    const held: Array<ServerResponse> = []
    const upstream = await serve((_req, res) => {
      held.push(res)
      // answers only once every request has arrived: a pool that queues some would never get here
      if (held.length === 300) { for (const r of held) r.end("{}") }
    })
    const p = pool()
    const results = await Promise.all(Array.from({ length: 300 }, () => post(p, upstream.url, { headersMs: 10_000 })))
    expect(results.every((r) => r.status === 200 && r.error === undefined)).toBe(true)
    expect(upstream.connections()).toBe(300)
  })

  it("no response head within the limit: a headers time-out", async () => {
    const upstream = await serve(() => {
      // never answers
    })
    const started = Date.now()
    const result = await post(pool(), upstream.url, { headersMs: 200 })
    expect(result.error).toBeInstanceOf(HttpClient.TimeoutError)
    expect((result.error as HttpClient.TimeoutError).phase).toBe("headers")
    expect(Date.now() - started).toBeLessThan(2_000)
  })

  it("a body that stops arriving: a body time-out, with what came before it", async () => {
    const upstream = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write("data: 1\n\n")
    })
    const result = await post(pool(), upstream.url, { bodyMs: 200 })
    expect(result.status).toBe(200)
    expect(result.body).toBe("data: 1\n\n")
    expect((result.error as HttpClient.TimeoutError).phase).toBe("body")
  })

  it("a connection that closes before the body's end is an error, not an end", async () => {
    const upstream = await serve((_req, res) => {
      res.writeHead(200, { "content-length": "100" })
      res.write("partial")
      setTimeout(() => res.destroy(), 20)
    })
    const result = await post(pool(), upstream.url)
    expect(result.body).toBe("partial")
    // Node reports it as "aborted" (ECONNRESET) on the response, or only as its close: either way an error
    expect(result.error).toBeInstanceOf(Error)
    expect(
      result.error instanceof HttpClient.PrematureCloseError ||
        (result.error as { code?: string }).code === "ECONNRESET"
    ).toBe(true)
  })

  it("a kept-alive connection the upstream closed as the request went out on it: sent once more, on a new one", async () => {
    const upstream = await serveRaw((socket, n) => {
      // the second request on a connection finds it closed (an idle time-out the upstream did not announce)
      if (n === 2) socket.resetAndDestroy()
      else socket.write("HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n{\"ok\":true}")
    })
    const p = pool(50)
    const first = await post(p, upstream.url)
    await new Promise((resolve) => setTimeout(resolve, 60))
    const second = await post(p, upstream.url)
    expect(first).toEqual({ status: 200, body: "{\"ok\":true}", error: undefined })
    expect(second).toEqual({ status: 200, body: "{\"ok\":true}", error: undefined })
    expect(upstream.requests()).toEqual([1, 2, 1])
  })

  it("the pool's other idle connections closed too: sent again while on a reused one, at most three times", async () => {
    const upstream = await serveRaw((socket, n) => {
      if (n === 2) socket.resetAndDestroy()
      else socket.write("HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n{\"ok\":true}")
    })
    const idleWhile = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
    // two idle connections, both closed: the third attempt goes out on a new one and is answered
    const two = pool(50)
    await Promise.all([post(two, upstream.url), post(two, upstream.url)])
    await idleWhile(60)
    expect((await post(two, upstream.url)).error).toBeUndefined()
    expect(upstream.requests()).toEqual([1, 1, 2, 2, 1])
    // four idle connections, all closed: three retries, then the fourth reset is the request's failure
    upstream.requests().length = 0
    const four = pool(50)
    await Promise.all(Array.from({ length: 4 }, () => post(four, upstream.url)))
    await idleWhile(60)
    const failed = await post(four, upstream.url)
    expect((failed.error as { code?: string }).code).toBe("ECONNRESET")
    expect(upstream.requests()).toEqual([1, 1, 1, 1, 2, 2, 2, 2])
  })

  it("a connection reused within staleAfterMs, reset before the answer: an error (its body was not kept for a retry)", async () => {
    const upstream = await serveRaw((socket, n) => {
      if (n === 2) socket.resetAndDestroy()
      else socket.write("HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n{\"ok\":true}")
    })
    const p = pool(10_000)
    expect((await post(p, upstream.url)).error).toBeUndefined()
    const second = await post(p, upstream.url)
    expect((second.error as { code?: string }).code).toBe("ECONNRESET")
    expect(upstream.requests()).toEqual([1, 2])
  })

  it("a new connection reset before the answer, or a reused one after its head: an error, not sent again", async () => {
    const fresh = await serveRaw((socket) => socket.resetAndDestroy())
    const reset = await post(pool(), fresh.url)
    expect((reset.error as { code?: string }).code).toBe("ECONNRESET")
    expect(fresh.requests()).toEqual([1])

    const midway = await serveRaw((socket, n) => {
      socket.write("HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n")
      if (n === 2) setTimeout(() => socket.resetAndDestroy(), 20)
      else socket.write("{\"ok\":true}")
    })
    const p = pool(0)
    expect((await post(p, midway.url)).error).toBeUndefined()
    const cut = await post(p, midway.url)
    expect(cut.status).toBe(200)
    expect(cut.error).toBeInstanceOf(Error)
    expect(midway.requests()).toEqual([1, 2])
  })

  it("a refused connection is an error with its code", async () => {
    const upstream = await serve(() => {})
    const url = upstream.url
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve))
    const result = await post(pool(), url)
    expect((result.error as { code?: string }).code).toBe("ECONNREFUSED")
  })

  it("an abort reaches the upstream (its request closes) and no handler call follows", async () => {
    let closed = false
    const upstream = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write("data: 1\n\n")
      res.on("close", () => (closed = true))
    })
    let abort: ((reason?: Error) => void) | undefined
    let calls = 0
    const p = pool()
    await new Promise<void>((resolve) => {
      HttpClient.post(p, HttpClient.targetOf(upstream.url), { headers: {}, body: "", ...limits }, {
        onConnect: (a) => (abort = a),
        onHeaders: () => true,
        onData: () => {
          abort!()
          setTimeout(resolve, 100)
          return true
        },
        onComplete: () => calls++,
        onError: () => calls++
      })
    })
    expect(calls).toBe(0)
    await expect.poll(() => closed).toBe(true)
  })

  it("an abort from onConnect itself sends nothing and throws nothing", async () => {
    let requests = 0
    const upstream = await serve(() => requests++)
    let calls = 0
    HttpClient.post(pool(), HttpClient.targetOf(upstream.url), { headers: {}, body: "{}", ...limits }, {
      onConnect: (abort) => abort(),
      onHeaders: () => true,
      onData: () => true,
      onComplete: () => calls++,
      onError: () => calls++
    })
    // an unheard 'error' of the destroyed request would fail the run here
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(calls).toBe(0)
    expect(requests).toBe(0)
  })

  it("requests posted in one turn are sent after it, together; one aborted before its end is never sent", async () => {
    const seen: Array<string> = []
    const server = createServer((req, res) => {
      let body = ""
      req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
      req.on("end", () => {
        seen.push(body)
        res.end("{}")
      })
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/messages`
    const p = pool()
    // Three idle keep-alive connections, so that nothing waits for a connect: a request ended at once would be written
    // to its socket at once, before the abort below.
    await Promise.all([post(p, url), post(p, url), post(p, url)])
    expect(p.openSockets).toBe(3)
    seen.length = 0
    const completed: Array<string> = []
    let failed = 0
    const send = (body: string) => {
      let abort: ((reason?: Error) => void) | undefined
      HttpClient.post(p, HttpClient.targetOf(url), { headers: {}, body, ...limits }, {
        onConnect: (a) => (abort = a),
        onHeaders: () => true,
        onData: () => true,
        onComplete: () => completed.push(body),
        onError: () => failed++
      })
      return () => abort!()
    }
    send("first")
    const abortSecond = send("second")
    send("third")
    // Later, but still in the turn that posted them: after node has given each request its socket (a tick after the
    // post), when a request ended at once has been written.
    await new Promise((resolve) => process.nextTick(resolve))
    abortSecond()
    await expect.poll(() => completed.length).toBe(2)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(seen.sort()).toEqual(["first", "third"])
    expect(completed.sort()).toEqual(["first", "third"])
    expect(failed).toBe(0)
  })

  it("a reader that returns false pauses the socket until it resumes", async () => {
    const upstream = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/octet-stream" })
      const chunk = Buffer.alloc(64 * 1024, 1)
      let written = 0
      const pump = () => {
        while (written < 64) {
          written++
          if (!res.write(chunk)) return res.once("drain", pump)
        }
        res.end()
      }
      pump()
    })
    let resume: (() => void) | undefined
    let received = 0
    let completed = false
    HttpClient.post(pool(), HttpClient.targetOf(upstream.url), { headers: {}, body: "", ...limits }, {
      onConnect: () => {},
      onHeaders: (_status, _headers, r) => {
        resume = r
        return true
      },
      onData: (chunk) => {
        received += chunk.length
        return false
      },
      onComplete: () => (completed = true),
      onError: () => {}
    })
    await expect.poll(() => received).toBeGreaterThan(0)
    await new Promise((resolve) => setTimeout(resolve, 200))
    // paused after the first read: far from the 4 MiB sent
    expect(received).toBeLessThan(1024 * 1024)
    expect(completed).toBe(false)
    while (!completed) {
      resume!()
      await new Promise((resolve) => setTimeout(resolve, 1))
    }
    expect(received).toBe(64 * 64 * 1024)
  })

  it("a retired pool closes its idle connections at once, the others once their request is over, which finishes", async () => {
    const open = new Set<Socket>()
    const connectionHeaders: Array<string | undefined> = []
    let held: ServerResponse | undefined
    const server = createServer((req, res) => {
      connectionHeaders.push(req.headers.connection)
      req.resume()
      req.on("end", () => {
        if (req.headers["x-hold"] === "1") {
          held = res
          res.writeHead(200, { "content-type": "text/event-stream" })
          res.write("data: 1\n\n")
        } else res.end("{}")
      })
    })
    server.on("connection", (socket: Socket) => {
      open.add(socket)
      socket.on("close", () => open.delete(socket))
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/messages`
    const target = HttpClient.targetOf(url)
    const p = pool()
    // Two idle connections, then a streamed answer in progress on one of them.
    await Promise.all([post(p, url), post(p, url)])
    let body = ""
    const streamed = new Promise<Result>((resolve) => {
      HttpClient.post(p, target, { headers: { "x-hold": "1" }, body: "{}", ...limits }, {
        onConnect: () => {},
        onHeaders: () => true,
        onData: (chunk) => {
          body += chunk.toString("utf8")
          return true
        },
        onComplete: () => resolve({ status: 200, body, error: undefined }),
        onError: (error) => resolve({ status: 200, body, error })
      })
    })
    await expect.poll(() => held !== undefined).toBe(true)
    expect(open.size).toBe(2)

    p.retire()
    // The idle one closes at once; the one in use stays, and its answer goes on to its end.
    await expect.poll(() => open.size).toBe(1)
    held!.end("data: 2\n\n")
    expect(await streamed).toEqual({ status: 200, body: "data: 1\n\ndata: 2\n\n", error: undefined })
    await expect.poll(() => open.size).toBe(0)
    expect(p.openSockets).toBe(0)
    // A request made on it afterwards still works, on a connection it does not keep.
    expect((await post(p, url)).status).toBe(200)
    expect(connectionHeaders.at(-1)).toBe("close")
    await expect.poll(() => open.size).toBe(0)
    expect(connectionHeaders.slice(0, 3)).toEqual(["keep-alive", "keep-alive", "keep-alive"])
  })

  it("refuses a URL that is not http(s)", () => {
    expect(() => HttpClient.targetOf("ftp://example.com/x")).toThrow(/http: or https:/)
    expect(HttpClient.targetOf("https://api.example.com/v1/messages?beta=true")).toMatchObject({
      secure: true,
      hostname: "api.example.com",
      port: 443,
      path: "/v1/messages?beta=true"
    })
    expect(HttpClient.targetOf("http://[::1]:8080/x").hostname).toBe("::1")
  })
})
