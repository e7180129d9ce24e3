/**
 * The `model-gateway` command: `serve` (the default), and `keys create|list|revoke`.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as KeysCommand from "./KeysCommand.js"
import type * as Logging from "./Logging.js"
import { serve } from "./Serve.js"

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
    label: Options.text("label").pipe(Options.optional, Options.withDescription("a note to recognise the key by"))
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
    Command.withSubcommands([serveCommand, keys])
  )
}

/** Runs the command line (`process.argv`). */
export const run = (logging: Logging.Logging) =>
  Command.run(command(logging), { name: "model-gateway", version: "0.1.0" })
