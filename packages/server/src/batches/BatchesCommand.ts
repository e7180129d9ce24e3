/**
 * `model-gateway batches submit|list|get|cancel|delete`: a client of a running gateway's batch routes. The gateway is
 * `--url` (or `GATEWAY_URL`, default `http://127.0.0.1:8080/v1`), the key `GATEWAY_API_KEY`. `submit` reads a JSON
 * Lines file, submits it, shows its progress while it polls, and writes the results (one a line, as the API gives
 * them, in submission order) to a file.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as BatchFile from "./BatchFile.js"
import * as BatchProgress from "./BatchProgress.js"

/** A batch command that failed: the gateway refused, could not be reached, or the batch did not complete. */
export class BatchCommandError extends Data.TaggedError("BatchCommandError")<{ readonly message: string }> {}

const DEFAULT_URL = "http://127.0.0.1:8080/v1"

export interface Target {
  readonly url: Option.Option<string>
}

interface Client {
  readonly base: string
  readonly call: (method: string, path: string, body?: unknown) => Effect.Effect<any, BatchCommandError>
}

const environment = Config.all({
  url: Config.withDefault(Config.string("GATEWAY_URL"), DEFAULT_URL),
  key: Config.option(Config.redacted("GATEWAY_API_KEY"))
})

const client = (target: Target): Effect.Effect<Client, BatchCommandError> =>
  Effect.gen(function*() {
    const env = yield* Effect.mapError(
      environment,
      (e) => new BatchCommandError({ message: `environment: ${String(e)}` })
    )
    if (Option.isNone(env.key)) {
      return yield* Effect.fail(new BatchCommandError({ message: "set GATEWAY_API_KEY to a key of the gateway" }))
    }
    const key = Redacted.value(env.key.value)
    const base = Option.getOrElse(target.url, () => env.url).replace(/\/+$/, "")
    const call = (method: string, path: string, body?: unknown) =>
      Effect.tryPromise({
        try: async () => {
          const response = await fetch(`${base}${path}`, {
            method,
            headers: {
              authorization: `Bearer ${key}`,
              "x-title": "model-gateway batches",
              ...(body === undefined ? {} : { "content-type": "application/json" })
            },
            ...(body === undefined ? {} : { body: JSON.stringify(body) })
          })
          const text = await response.text()
          let json: any
          try {
            json = JSON.parse(text)
          } catch {
            json = undefined
          }
          if (!response.ok) {
            throw new BatchCommandError({
              message: `${method} ${path}: ${response.status} ${json?.error?.message ?? text.slice(0, 200)}`
            })
          }
          return json
        },
        catch: (e) =>
          e instanceof BatchCommandError
            ? e
            : new BatchCommandError({ message: `cannot reach the gateway at ${base}: ${(e as Error).message}` })
      })
    return { base, call }
  })

const TERMINAL = new Set(["completed", "failed", "expired", "cancelled"])

const writeResults = (path: string, batch: any) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) =>
    fs.writeFileString(
      path,
      (batch.results ?? []).map((result: unknown) => `${JSON.stringify(result)}\n`).join("")
    )).pipe(
      Effect.mapError((e) => new BatchCommandError({ message: `cannot write ${path}: ${e.message}` }))
    )

/** The results file next to the input: `in.jsonl` gives `in.results.jsonl`. */
export const resultsPath = (file: string): string => file.replace(/(\.jsonl?)?$/i, ".results.jsonl")

export interface SubmitOptions extends Target {
  readonly file: string
  readonly endpoint: Option.Option<string>
  readonly model: Option.Option<string>
  readonly output: Option.Option<string>
  readonly only: Option.Option<string>
  readonly intervalMs: number
  readonly wait: boolean
}

/** Shows one progress line: rewritten in place on a terminal, a line each time it changes otherwise. */
const progressWriter = () => {
  const tty = process.stderr.isTTY === true
  let last = ""
  return {
    show: (text: string) =>
      Effect.sync(() => {
        if (text === last) return
        last = text
        process.stderr.write(tty ? `\r\x1b[2K${text}` : `${text}\n`)
      }),
    end: Effect.sync(() => {
      if (tty && last !== "") process.stderr.write("\n")
    })
  }
}

/** `batches submit FILE.jsonl [--endpoint E] [--model M]`: submits, polls with progress, writes the results. */
export const submit = (options: SubmitOptions) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(options.file).pipe(
      Effect.mapError((e) => new BatchCommandError({ message: `cannot read ${options.file}: ${e.message}` }))
    )
    const submission = yield* Effect.try({
      try: () =>
        BatchFile.parse(options.file, text, {
          endpoint: Option.getOrUndefined(options.endpoint),
          model: Option.getOrUndefined(options.model)
        }),
      catch: (e) => new BatchCommandError({ message: (e as Error).message })
    })
    const api = yield* client(options)
    const only = Option.map(options.only, (list) => list.split(",").map((s) => s.trim()).filter((s) => s !== ""))
    const started = Date.now()
    const created = yield* api.call("POST", "/batches", {
      endpoint: submission.endpoint,
      model: submission.model,
      completion_window: "24h",
      requests: submission.requests,
      ...(Option.isSome(only) ? { provider: { only: only.value } } : {})
    })
    yield* Console.error(`submitted ${created.id}: ${submission.requests.length} requests to ${submission.endpoint}`)
    if (!options.wait) return yield* Console.log(created.id)
    const progress = progressWriter()
    let batch = created
    while (!TERMINAL.has(batch.status)) {
      yield* progress.show(BatchProgress.line({
        status: batch.status,
        total: batch.request_counts.total,
        completed: batch.request_counts.completed,
        failed: batch.request_counts.failed,
        elapsedMs: Date.now() - started
      }))
      yield* Effect.sleep(options.intervalMs)
      batch = yield* api.call("GET", `/batches/${encodeURIComponent(created.id)}`)
    }
    yield* progress.show(BatchProgress.line({
      status: batch.status,
      total: batch.request_counts.total,
      completed: batch.request_counts.completed,
      failed: batch.request_counts.failed,
      elapsedMs: Date.now() - started
    }))
    yield* progress.end
    const output = Option.getOrElse(options.output, () => resultsPath(options.file))
    yield* writeResults(output, batch)
    const counts = batch.request_counts
    yield* Console.log(
      `${batch.id} ${batch.status}: ${counts.completed} completed, ${counts.failed} failed of ${counts.total}; ` +
        `results in ${output}${batch.usage?.cost === undefined ? "" : `; cost $${batch.usage.cost}`}`
    )
    if (batch.status !== "completed") {
      return yield* Effect.fail(
        new BatchCommandError({
          message: `batch ${batch.id} ${batch.status}${batch.error?.message ? `: ${batch.error.message}` : ""}`
        })
      )
    }
  })

const pad = (rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)))
  return rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd()).join("\n")
}

export interface ListOptions extends Target {
  readonly limit: number
  readonly status: ReadonlyArray<string>
  readonly after: Option.Option<string>
  readonly json: boolean
}

/** `batches list`: the newest batches of the key's workspace. */
export const list = (options: ListOptions) =>
  Effect.gen(function*() {
    const api = yield* client(options)
    const query = new URLSearchParams({ limit: String(options.limit) })
    for (const status of options.status) query.append("status", status)
    if (Option.isSome(options.after)) query.set("after", options.after.value)
    const page = yield* api.call("GET", `/batches?${query}`)
    if (options.json) return yield* Console.log(JSON.stringify(page, null, 2))
    if (page.data.length === 0) return yield* Console.log("no batches")
    yield* Console.log(pad([
      ["ID", "STATUS", "ENDPOINT", "MODEL", "DONE", "FAILED", "TOTAL", "CREATED"],
      ...page.data.map((b: any) => [
        b.id,
        b.status,
        b.endpoint,
        b.model,
        String(b.request_counts.completed),
        String(b.request_counts.failed),
        String(b.request_counts.total),
        new Date(b.created_at * 1000).toISOString()
      ])
    ]))
    if (page.has_more) yield* Console.log(`more: --after ${page.last_id}`)
  })

export interface GetOptions extends Target {
  readonly id: string
  readonly output: Option.Option<string>
}

/** `batches get ID`: the record as the API gives it; with `--output`, the results written to a file. */
export const get = (options: GetOptions) =>
  Effect.gen(function*() {
    const api = yield* client(options)
    const batch = yield* api.call("GET", `/batches/${encodeURIComponent(options.id)}`)
    if (Option.isSome(options.output)) {
      yield* writeResults(options.output.value, batch)
      const { results: _results, ...record } = batch
      return yield* Console.log(JSON.stringify(record, null, 2))
    }
    yield* Console.log(JSON.stringify(batch, null, 2))
  })

/** `batches cancel ID`. */
export const cancel = (options: Target & { readonly id: string }) =>
  Effect.gen(function*() {
    const api = yield* client(options)
    const batch = yield* api.call("POST", `/batches/${encodeURIComponent(options.id)}/cancel`)
    yield* Console.log(`${batch.id} ${batch.status}`)
  })

/** `batches delete ID`. */
export const remove = (options: Target & { readonly id: string }) =>
  Effect.gen(function*() {
    const api = yield* client(options)
    const deleted = yield* api.call("DELETE", `/batches/${encodeURIComponent(options.id)}`)
    yield* Console.log(`deleted ${deleted.id}`)
  })
