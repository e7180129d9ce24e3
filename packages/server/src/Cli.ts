/**
 * The `model-gateway` command: `serve` (the default), `keys create|list|revoke`, and
 * `batches submit|list|get|cancel|delete`.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as BatchesCommand from "./batches/BatchesCommand.js"
import type * as KeysCommandModule from "./KeysCommand.js"
import type * as Logging from "./Logging.js"

// The gateway itself (every adapter, the speech engine's loader, ...) is loaded only by the commands that use it:
// `batches` is a client of a running gateway, and starts in a fraction of the time.
const serve = (logging: Logging.Logging) =>
  Effect.flatMap(Effect.promise(() => import("./Serve.js")), (module) => module.serve(logging))

const KeysCommand = {
  create: (options: KeysCommandModule.CreateOptions) =>
    Effect.flatMap(Effect.promise(() => import("./KeysCommand.js")), (module) => module.create(options)),
  list: (options: { readonly json: boolean }) =>
    Effect.flatMap(Effect.promise(() => import("./KeysCommand.js")), (module) => module.list(options)),
  revoke: (keyId: string) =>
    Effect.flatMap(Effect.promise(() => import("./KeysCommand.js")), (module) => module.revoke(keyId))
}

/** The command tree; `logging` is how the gateway's request runtime logs too. */
export const command = (logging: Logging.Logging) => {
  const serveCommand = Command.make("serve", {}, () => serve(logging)).pipe(
    Command.withDescription("Run the gateway (the default command).")
  )
  const create = Command.make("create", {
    workspace: Options.text("workspace").pipe(
      Options.withDefault("default"),
      Options.withDescription("the key's workspace")
    ),
    management: Options.boolean("management").pipe(Options.withDescription("a management key")),
    interns: Options.boolean("interns").pipe(Options.withDescription("a member of the interns programme")),
    label: Options.text("label").pipe(Options.optional, Options.withDescription("a note to recognise the key by")),
    requestsPerMinute: Options.integer("requests-per-minute").pipe(
      Options.optional,
      Options.withDescription("the most requests the key may make in any minute")
    ),
    inputTokensPerMinute: Options.integer("input-tokens-per-minute").pipe(
      Options.optional,
      Options.withDescription("the most input tokens the key may use in any minute")
    ),
    outputTokensPerMinute: Options.integer("output-tokens-per-minute").pipe(
      Options.optional,
      Options.withDescription("the most output tokens the key may use in any minute")
    ),
    budgetUsd: Options.text("budget-usd").pipe(
      Options.optional,
      Options.withDescription("the most the key may spend per budget period, in USD (e.g. 25 or 0.50)")
    ),
    // Text, checked with the other flags (`KeysCommand.limitsOf`): a period without a budget is refused there, and a
    // wrong one named by its flag.
    budgetPeriod: Options.text("budget-period").pipe(
      Options.optional,
      Options.withDescription("the budget's period: day, week or month (default month), in UTC (weeks start on Monday)")
    )
  }, KeysCommand.create).pipe(Command.withDescription("Make a key; it is printed once, only its digest is stored."))
  const list = Command.make("list", { json: Options.boolean("json") }, KeysCommand.list).pipe(
    Command.withDescription("List the keys (ids, workspaces, sources; never a secret).")
  )
  const revoke = Command.make(
    "revoke",
    { keyId: Args.text({ name: "key-id" }) },
    ({ keyId }) => KeysCommand.revoke(keyId)
  ).pipe(Command.withDescription("Revoke a key by its id."))
  const keys = Command.make("keys").pipe(
    Command.withDescription("Manage API keys kept until revoked."),
    Command.withSubcommands([create, list, revoke])
  )
  return Command.make("model-gateway", {}, () => serve(logging)).pipe(
    Command.withDescription("A self-hosted model gateway: one key, one endpoint, routing across providers."),
    Command.withSubcommands([serveCommand, keys, batches()])
  )
}

/** Runs the command line (`process.argv`), its output plain where it is not a terminal (see `plainConsole`). */
export const run = (logging: Logging.Logging) => {
  const cli = Command.run(command(logging), { name: "model-gateway", version: "0.1.0" })
  return (args: ReadonlyArray<string>) =>
    Console.consoleWith((console) => Console.withConsole(cli(args), plainConsole(console, process)))
}

/** An ANSI escape sequence: a colour, a style, a cursor move. */
const ANSI = new RegExp(`${String.fromCharCode(0x1b)}\\[[0-9;?]*[A-Za-z]`, "g")

const plain = (args: ReadonlyArray<unknown>) => args.map((arg) => typeof arg === "string" ? arg.replace(ANSI, "") : arg)

/**
 * `console`, its `log` (standard output) and `error` (standard error) without ANSI escapes where that output is not a
 * terminal, or `NO_COLOR` is set (no-color.org): @effect/cli prints its help and usage errors in colour always, which
 * `model-gateway --help > usage.txt` or a pipe into `less` would otherwise show as escape codes.
 */
export const plainConsole = (
  console: Console.Console,
  { env, stderr, stdout }: {
    readonly env: Record<string, string | undefined>
    readonly stdout: { readonly isTTY?: boolean }
    readonly stderr: { readonly isTTY?: boolean }
  }
): Console.Console => {
  const noColor = env.NO_COLOR !== undefined && env.NO_COLOR !== ""
  const plainOut = noColor || stdout.isTTY !== true
  const plainErr = noColor || stderr.isTTY !== true
  if (!plainOut && !plainErr) return console
  const { unsafe } = console
  const out: Partial<Pick<Console.Console, "log" | "error">> = {}
  const unsafeOut: Partial<Pick<Console.UnsafeConsole, "log" | "error">> = {}
  if (plainOut) {
    out.log = (...args) => console.log(...plain(args))
    unsafeOut.log = (...args) => unsafe.log(...plain(args))
  }
  if (plainErr) {
    out.error = (...args) => console.error(...plain(args))
    unsafeOut.error = (...args) => unsafe.error(...plain(args))
  }
  // Made on the given console, so that everything else (its type id, its other methods) is the same.
  return Object.assign(Object.create(console) as Console.Console, out, {
    unsafe: Object.assign(Object.create(unsafe) as Console.UnsafeConsole, unsafeOut)
  })
}

/** `batches ...`: a client of a running gateway (`--url` or GATEWAY_URL, and GATEWAY_API_KEY). */
const batches = () => {
  const url = Options.text("url").pipe(
    Options.optional,
    Options.withDescription("the gateway's API base (default GATEWAY_URL, else http://127.0.0.1:8080/v1)")
  )
  const id = Args.text({ name: "batch-id" })
  const submit = Command.make("submit", {
    url,
    file: Args.file({ name: "file", exists: "yes" }),
    endpoint: Options.text("endpoint").pipe(
      Options.optional,
      Options.withDescription(
        "/v1/chat/completions, /v1/responses, /v1/messages or /v1/embeddings (default: the lines' url)"
      )
    ),
    model: Options.text("model").pipe(Options.optional, Options.withDescription("default: the bodies' model")),
    output: Options.text("output").pipe(
      Options.optional,
      Options.withDescription("where the results go, one a line (default FILE.results.jsonl)")
    ),
    only: Options.text("only").pipe(
      Options.optional,
      Options.withDescription("only these providers (comma-separated)")
    ),
    intervalMs: Options.integer("interval-ms").pipe(
      Options.withDefault(1000),
      Options.withDescription("how often to poll")
    ),
    noWait: Options.boolean("no-wait").pipe(Options.withDescription("print the batch id and leave it running"))
  }, ({ noWait, ...options }) => BatchesCommand.submit({ ...options, wait: !noWait })).pipe(
    Command.withDescription("Submit a JSON Lines file (one request a line), show its progress, write its results.")
  )
  const list = Command.make("list", {
    url,
    limit: Options.integer("limit").pipe(Options.withDefault(20)),
    status: Options.text("status").pipe(Options.repeated),
    after: Options.text("after").pipe(Options.optional),
    json: Options.boolean("json")
  }, BatchesCommand.list).pipe(Command.withDescription("List the newest batches of the key's workspace."))
  const get = Command.make("get", {
    url,
    id,
    output: Options.text("output").pipe(
      Options.optional,
      Options.withDescription("write the results to this file (one a line) instead of printing them")
    )
  }, BatchesCommand.get).pipe(Command.withDescription("Print a batch (with its results once it has ended)."))
  const cancel = Command.make("cancel", { url, id }, BatchesCommand.cancel).pipe(
    Command.withDescription("Cancel a batch: running requests finish, no new one starts.")
  )
  const remove = Command.make("delete", { url, id }, BatchesCommand.remove).pipe(
    Command.withDescription("Delete a batch that has ended (its usage records stay).")
  )
  return Command.make("batches").pipe(
    Command.withDescription("Submit and follow batches on a running gateway."),
    Command.withSubcommands([submit, list, get, cancel, remove])
  )
}
