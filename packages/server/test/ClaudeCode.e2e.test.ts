/**
 * The real Claude Code CLI (npm `@anthropic-ai/claude-code`, print mode, offline) through the gateway, over an
 * Anthropic upstream and over an OpenAI-compatible one, with a model whose endpoints allow 8,192 output tokens: Claude
 * Code asks for 32,000, and must get its answer (the request clamped), not a 503 it would retry forever.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic, startFakeOpenAi } from "../../../packages/provider-adapters/test/fakes/index.js"
import { decode } from "../src/Config.js"
import type { RunningServer } from "../src/Gateway.js"
import { startServer } from "../src/Gateway.js"

const KEY = "mg-claude-code-key"

/** The CLI's native binary: the wrapper package's (linked by its postinstall) or the platform package's own. */
const claudeBinary = (): string => {
  const require = createRequire(import.meta.url)
  const wrapper = join(dirname(require.resolve("@anthropic-ai/claude-code/package.json")), "bin", "claude.exe")
  const platform = `@anthropic-ai/claude-code-${process.platform}-${process.arch}`
  try {
    const native = join(dirname(require.resolve(`${platform}/package.json`)), "claude")
    if (existsSync(native)) return native
  } catch {
    // no platform package: the wrapper's binary is the native one
  }
  return wrapper
}

let anthropic: FakeUpstream
let openai: FakeUpstream
let gateway: RunningServer

const limited = (provider: string, upstreamModel: string) => ({
  endpoints: [{
    provider,
    upstreamModel,
    pricing: { prompt: "0.000003", completion: "0.000015" },
    maxCompletionTokens: 8192,
    contextLength: 200000,
    supportedParameters: ["tools", "tool_choice", "max_tokens", "temperature"]
  }]
})

beforeAll(async () => {
  anthropic = await startFakeAnthropic({ acceptBearer: true })
  openai = await startFakeOpenAi()
  const { config } = decode({
    storage: "memory:",
    providers: {
      anthro: { kind: "anthropic", baseUrl: anthropic.url, apiKey: "sk-upstream-anthropic" },
      acme: { kind: "openai", baseUrl: openai.url, apiKey: "sk-upstream-openai" }
    },
    models: { "cc/claude": limited("anthro", "claude-limited"), "cc/gpt": limited("acme", "gpt-limited") },
    keys: [{ key: KEY, management: true }]
  })
  gateway = await startServer(config, { host: "127.0.0.1", port: 0, requestLog: false })
})
afterAll(async () => {
  await gateway.close(1000)
  await Promise.all([anthropic.close(), openai.close()])
})

const runClaude = (model: string, prompt: string) =>
  new Promise<{ code: number | null; output: string; ms: number }>((resolve) => {
    const home = mkdtempSync(join(tmpdir(), "mg-claude-home-"))
    const started = Date.now()
    const child = spawn(claudeBinary(), ["-p", prompt, "--model", model, "--output-format", "json"], {
      cwd: home,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: home,
        ANTHROPIC_BASE_URL: gateway.url,
        ANTHROPIC_AUTH_TOKEN: KEY,
        ANTHROPIC_SMALL_FAST_MODEL: model,
        ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        DISABLE_TELEMETRY: "1",
        DISABLE_AUTOUPDATER: "1",
        DISABLE_ERROR_REPORTING: "1"
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (d) => (output += d))
    child.stderr.on("data", (d) => (output += d))
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
    child.on("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, output, ms: Date.now() - started })
    })
  })

/** The JSON result line of `--output-format json`. */
const resultOf = (output: string) => {
  const line = output.split("\n").find((l) => l.startsWith("{") && l.includes("\"type\":\"result\""))
  if (line === undefined) throw new Error(`no result in Claude Code's output:\n${output}`)
  return JSON.parse(line) as { is_error: boolean; result: string; subtype: string }
}

describe("Claude Code through the gateway, a model limited to 8,192 output tokens", () => {
  it.each(
    [
      ["an Anthropic upstream", "cc/claude", () => anthropic, "/v1/messages"],
      ["an OpenAI-compatible upstream", "cc/gpt", () => openai, "/v1/chat/completions"]
    ] as const
  )("answers over %s in under 30 s, sending 8,192 where it asked for 32,000", async (_, model, fake, path) => {
    fake().reset()
    const run = await runClaude(model, "Say hello to the gateway")
    expect(run.code, run.output).toBe(0)
    const result = resultOf(run.output)
    expect(result).toMatchObject({ is_error: false, subtype: "success" })
    expect(result.result).toContain("Say hello to the gateway")
    expect(run.ms).toBeLessThan(30_000)
    const calls = fake().requests.filter((r) => r.path === path)
    expect(calls.length).toBeGreaterThan(0)
    for (const call of calls) {
      expect(call.body.max_tokens ?? call.body.max_completion_tokens).toBe(8192)
    }
  }, 40_000)
})
