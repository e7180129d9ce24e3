/**
 * The `model-gateway` program, loaded by `main.ts` once V8's flags are set: `npm start` runs `model-gateway serve`.
 * Effect's runtime handles signals (SIGTERM and SIGINT interrupt the program, which shuts the gateway down
 * gracefully) and the exit code; a start-up failure is one line (which key of the configuration, which port, which
 * database, and why) and exit code 1.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Logging from "./Logging.js"

// `model-gateway` and `model-gateway serve` start the gateway without loading the command-line parser (@effect/cli and
// its printers: a few MB of memory the serving process would carry for nothing); every other command line, `--help`
// included, goes to the parser.
const args = process.argv.slice(2)
const plainServe = args.length === 0 || (args.length === 1 && args[0] === "serve")

const run = (logging: Logging.Logging) =>
  plainServe
    ? Effect.flatMap(Effect.promise(() => import("./Serve.js")), (module) => module.serve(logging))
    : Effect.flatMap(Effect.promise(() => import("./Cli.js")), (module) => module.run(logging)(process.argv))

const program = Effect.gen(function*() {
  const { format, level } = yield* Logging.fromEnvironment.pipe(
    Effect.tapError((error) => Console.error(`model-gateway: ${String(error)}`))
  )
  const logging = Logging.make(format, level)
  yield* run(logging).pipe(
    Effect.tapError((error) => {
      // @effect/cli prints its own usage errors
      if (isValidationError(error)) return Effect.void
      const message = error instanceof Error ? error.message : String(error)
      // One plain line on a terminal or in a log file; a JSON line where lines are parsed.
      return format === "json" ? Effect.logError(message) : Console.error(`model-gateway: ${message}`)
    }),
    Effect.provide(Logging.layer(logging))
  )
})

/** @effect/cli's usage errors (`ValidationError`), told apart without loading @effect/cli. */
const isValidationError = (error: unknown): boolean =>
  typeof error === "object" && error !== null && Symbol.for("@effect/cli/ValidationError") in error

NodeRuntime.runMain(program.pipe(Effect.provide(NodeContext.layer)), {
  disableErrorReporting: true,
  disablePrettyLogger: true
})
