/** Starts fake upstreams and a real gateway server on random ports for end-to-end tests. */
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import {
  freePortThatRefuses,
  startFakeAnthropic,
  startFakeOpenAi
} from "../../../packages/provider-adapters/test/fakes/index.js"
import { decode } from "../src/Config.js"
import type { RunningServer } from "../src/Gateway.js"
import { startServer } from "../src/Gateway.js"
import type * as Logging from "../src/Logging.js"
import { OffsetClock } from "./OffsetClock.js"

export const KEY = "mg-test-management-key"
export const TEAM_KEY = "mg-test-team-b-key"

const pricing = { prompt: "0.000003", completion: "0.000015", request: "0", image: "0" }

export interface Harness {
  readonly anthropic: FakeUpstream
  readonly openai: FakeUpstream
  readonly gateway: RunningServer
  readonly url: string
  /** The gateway's clock: the real one, shifted by what `reset` and the tests add. */
  readonly clock: OffsetClock
  /** Clears the fakes, and moves the gateway's clock an hour on so that every endpoint is healthy again. */
  reset(): void
  close(): Promise<void>
}

export const startHarness = async (
  overrides: {
    maxBodyBytes?: number
    storage?: string
    server?: Record<string, unknown>
    batches?: Record<string, unknown>
    /** Keys besides the two every harness has. */
    keys?: ReadonlyArray<Record<string, unknown>>
    /** Models besides the harness's. */
    models?: Record<string, unknown>
    /** Top-level configuration keys besides those the harness sets (`workspaces`, `limits`, ...). */
    config?: Record<string, unknown>
    /** How the gateway logs, with a line per request; without it, no request is logged. */
    logging?: Logging.Logging
  } = {}
): Promise<Harness> => {
  const anthropic = await startFakeAnthropic()
  const openai = await startFakeOpenAi()
  const refused = await freePortThatRefuses()
  const timeouts = { firstByteMs: 1500, idleMs: 1500, requestMs: 1500 }
  const { config } = decode({
    server: {
      basePath: "/v1",
      ...(overrides.maxBodyBytes ? { maxBodyBytes: overrides.maxBodyBytes } : {}),
      ...overrides.server
    },
    storage: overrides.storage ?? "memory:",
    providers: {
      anthro: { kind: "anthropic", baseUrl: anthropic.url, apiKey: "sk-upstream-anthropic", timeouts },
      acme: { kind: "openai", baseUrl: openai.url, apiKey: "sk-upstream-openai", timeouts },
      dead: { kind: "anthropic", baseUrl: refused, apiKey: "sk-dead", timeouts }
    },
    models: {
      "anthro/claude": {
        name: "Fake Claude",
        endpoints: [{
          provider: "anthro",
          upstreamModel: "claude-fake-1",
          pricing: { ...pricing, inputCacheRead: "0.0000003" },
          inputModalities: ["text", "image", "file"]
        }]
      },
      "anthro/backup": { endpoints: [{ provider: "anthro", upstreamModel: "claude-backup", pricing }] },
      "acme/gpt": {
        name: "Fake GPT",
        endpoints: [{
          provider: "acme",
          upstreamModel: "gpt-fake-1",
          pricing: { prompt: "0.000001", completion: "0.000002" },
          supportedParameters: ["tools", "tool_choice", "temperature", "top_p", "stop", "max_tokens"],
          inputModalities: ["text", "image"]
        }]
      },
      "dead/model": { endpoints: [{ provider: "dead", upstreamModel: "nothing", pricing }] },
      ...overrides.models
    },
    keys: [
      { key: KEY, workspace: "default", management: true, interns: true },
      { key: TEAM_KEY, workspace: "team-b" },
      ...(overrides.keys ?? [])
    ],
    ...(overrides.batches === undefined ? {} : { batches: overrides.batches }),
    ...overrides.config
  })
  const clock = new OffsetClock()
  const gateway = await startServer(config, {
    host: "127.0.0.1",
    port: 0,
    clock,
    logging: overrides.logging,
    requestLog: overrides.logging !== undefined
  })
  return {
    anthropic,
    openai,
    gateway,
    url: gateway.url,
    clock,
    reset() {
      anthropic.reset()
      openai.reset()
      // An hour later for the gateway: no cooldown, Retry-After or outage one test left decides the next one.
      clock.offset += 60 * 60_000
    },
    async close() {
      await gateway.close(1000)
      await Promise.all([anthropic.close(), openai.close()])
    }
  }
}

/** POSTs JSON to the gateway with the management key. */
export const post = (h: Harness, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${h.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}`, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

/** Reads an SSE response into named events. */
export const readEvents = async (response: Response) => {
  const text = await response.text()
  return text.split("\n\n").filter((f) => f.trim() !== "").map((frame) => {
    const event = /^event: (.*)$/m.exec(frame)?.[1]
    const data = /^data: (.*)$/m.exec(frame)?.[1]
    return { event, data: data === undefined ? undefined : JSON.parse(data) }
  })
}

/** The JSON body of a response, untyped for assertions. */
export const json = (response: Response): Promise<any> => response.json()
