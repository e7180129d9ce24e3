#!/usr/bin/env node
/**
 * The `model-gateway` process: `npm start` runs `model-gateway serve`. Effect's runtime handles signals (SIGTERM and
 * SIGINT interrupt the program, which shuts the gateway down gracefully) and the exit code; a start-up failure is one
 * line (which key of the configuration, which port, which database, and why) and exit code 1.
 */
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Cli from "./Cli.js"
import * as Logging from "./Logging.js"

const program = Effect.gen(function*() {
  const { format, level } = yield* Logging.fromEnvironment.pipe(
    Effect.tapError((error) => Console.error(`model-gateway: ${String(error)}`))
  )
  const logging = Logging.make(format, level)
  yield* Cli.run(logging)(process.argv).pipe(
    Effect.tapError((error) => {
      // @effect/cli prints its own usage errors
      if (ValidationError.isValidationError(error)) return Effect.void
      const message = error instanceof Error ? error.message : String(error)
      // One plain line on a terminal or in a log file; a JSON line where lines are parsed.
      return format === "json" ? Effect.logError(message) : Console.error(`model-gateway: ${message}`)
    }),
    Effect.provide(Logging.layer(logging))
  )
})

NodeRuntime.runMain(program.pipe(Effect.provide(NodeContext.layer)), {
  disableErrorReporting: true,
  disablePrettyLogger: true
})
