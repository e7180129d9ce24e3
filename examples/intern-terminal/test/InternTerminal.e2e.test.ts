/**
 * The example against a real gateway: an intern is created and provisioned (its daemon a real process), then the
 * client reveals its daemon access and chats with it, as a module and as the `intern-terminal` command
 * (`dist/main.js`, built by `npm test`) reading lines from standard input.
 */
import { Gateway } from "@model-gateway/server"
import { Config } from "@model-gateway/server"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic } from "../../../packages/provider-adapters/test/fakes/index.js"
import { attach, daemonAccess, TerminalError } from "../src/TerminalClient.js"

const MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url))
const DAEMON = fileURLToPath(new URL("../../../packages/server/dist/interns/InternDaemonMain.js", import.meta.url))
const KEY = "mg-example-interns"

let upstream: FakeUpstream
let running: Gateway.RunningServer
let gateway: string
let internId: string

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${gateway}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", ...init.headers }
  }).then((r) => r.json() as Promise<any>)

beforeAll(async () => {
  upstream = await startFakeAnthropic()
  const { config } = Config.decode({
    storage: "memory:",
    providers: { anthro: { kind: "anthropic", baseUrl: upstream.url, apiKey: "sk-fake" } },
    models: {
      "anthro/claude": {
        endpoints: [{ provider: "anthro", upstreamModel: "claude-fake-1", pricing: { prompt: "0", completion: "0" } }]
      }
    },
    keys: [{ key: KEY, workspace: "acme", interns: true }],
    interns: { defaultModel: "anthro/claude" }
  })
  running = await Gateway.startServer(config, { port: 0, requestLog: false, interns: { daemonEntry: DAEMON } })
  gateway = `${running.url}/v1`
  const intern = await api("/interns", {
    method: "POST",
    body: JSON.stringify({ name: "Ada", instructions: "You are Ada.", provision: true })
  })
  internId = intern.id
  for (let i = 0; i < 200 && (await api(`/interns/${internId}`)).status !== "running"; i++) {
    await new Promise((r) => setTimeout(r, 25))
  }
})
afterAll(async () => {
  await running.close(500)
  await upstream.close()
})

it("reveals the daemon access, attaches and chats, a session carrying on", async () => {
  const access = await daemonAccess(gateway, KEY, internId)
  const terminal = await attach(access)
  const lines = terminal.lines[Symbol.asyncIterator]()
  expect((await lines.next()).value).toEqual({ type: "ready", intern: internId, session_id: null })
  const ask = async (content: string) => {
    terminal.send(content)
    let text = ""
    for (;;) {
      const line = (await lines.next()).value
      if (line.type === "delta") text += line.content
      else return { text, line }
    }
  }
  const first = await ask("Hello")
  expect(first.text).toBe("Echo: Hello")
  expect(first.line).toMatchObject({ type: "done", session_id: expect.stringMatching(/^sess_/) })
  await ask("Second")
  expect(upstream.requests.at(-1)!.body.messages.map((m: any) => m.content)).toEqual([
    "Hello",
    "Echo: Hello",
    "Second"
  ])
  expect(upstream.requests.at(-1)!.body.system).toBe("You are Ada.")
  terminal.close()
  const refused = await daemonAccess(gateway, KEY, "intern_00000000000000000000").catch((e) => e)
  expect(refused).toBeInstanceOf(TerminalError)
  expect([refused.status, refused.reason]).toEqual([404, "not_found"])
})

const command = (args: ReadonlyArray<string>, input: string) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { PATH: process.env.PATH ?? "", GATEWAY_URL: gateway, GATEWAY_API_KEY: KEY }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("exit", (code) => resolve({ code, stdout, stderr }))
    child.stdin.end(input)
  })

it("is a command that chats line by line from standard input", async () => {
  const { code, stderr, stdout } = await command([internId], "What is 2+2?\n\nAnd 3+3?\n")
  expect(code).toBe(0)
  expect(stdout).toBe("Echo: What is 2+2?\nEcho: And 3+3?\n")
  expect(stderr).toContain(`attached to ${internId} at http://127.0.0.1:`)
  const unknown = await command(["intern_00000000000000000000"], "hi\n")
  expect(unknown.code).toBe(1)
  expect(unknown.stderr).toBe("intern-terminal: 404: Intern 'intern_00000000000000000000' not found\n")
})
