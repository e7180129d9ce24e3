/** Helpers of the batch tests: the gateway's batch routes over HTTP, and waiting for a batch to get somewhere. */
import { UsageLog } from "@model-gateway/core"
import { Effect } from "effect"
import type { Harness } from "./harness.js"
import { KEY } from "./harness.js"

/** A fast worker: short polls, leases and back-offs, so that tests take seconds. */
export const FAST_WORKER = { pollMs: 25, leaseMs: 2_000, retryBaseMs: 20 }

/**
 * The configuration file of a gateway process for the batch tests run on real processes: one OpenAI-compatible
 * provider at `upstreamUrl` with one model, `acme/gpt`, one management key, and `batches` as given.
 */
export const processConfig = (upstreamUrl: string, key: string, batches: Record<string, unknown>) => ({
  server: { port: 0 },
  providers: { acme: { kind: "openai", baseUrl: upstreamUrl, apiKey: "sk-up" } },
  models: {
    "acme/gpt": {
      endpoints: [{
        provider: "acme",
        upstreamModel: "gpt-fake",
        pricing: { prompt: "0.000001", completion: "0.000002" }
      }]
    }
  },
  keys: [{ key, workspace: "default", management: true }],
  batches
})

export const call = (
  h: { readonly url: string },
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  key = KEY
) =>
  fetch(`${h.url}/v1${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers
    },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
  })

/** Submits a batch; the response and its JSON. */
export const submit = async (
  h: { readonly url: string },
  body: unknown,
  headers: Record<string, string> = {},
  key = KEY
) => {
  const response = await call(h, "POST", "/batches", body, headers, key)
  return { status: response.status, json: await response.json() as any, headers: response.headers }
}

export const chatRequests = (n: number, prefix = "req") =>
  Array.from({ length: n }, (_, i) => ({
    custom_id: `${prefix}-${i}`,
    body: { messages: [{ role: "user", content: `Say ${i}` }], max_tokens: 16 }
  }))

export const getBatch = async (h: { readonly url: string }, id: string, key = KEY) => {
  const response = await call(h, "GET", `/batches/${id}`, undefined, {}, key)
  return { status: response.status, json: await response.json() as any }
}

/** Polls a batch until its status is one of `statuses`; fails after `ms`. */
export const waitFor = async (
  h: { readonly url: string },
  id: string,
  statuses: ReadonlyArray<string>,
  ms = 15_000,
  key = KEY
): Promise<any> => {
  const deadline = Date.now() + ms
  let last: any
  while (Date.now() < deadline) {
    last = (await getBatch(h, id, key)).json
    if (statuses.includes(last.status)) return last
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`batch ${id} did not reach ${statuses.join("|")}: ${JSON.stringify(last).slice(0, 500)}`)
}

/** The gateway's usage records, newest first (pending ones written first). */
export const usageRecords = (h: Harness) =>
  h.gateway.gateway.runtime.runPromise(
    Effect.flatMap(UsageLog.UsageLog, (log) => Effect.zipRight(log.flush, log.list({ limit: 10_000 })))
  )
