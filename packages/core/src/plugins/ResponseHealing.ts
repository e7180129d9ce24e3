/**
 * The response-healing plugin: when the request asked for a `json_schema` output format, the JSON answer's text is
 * repaired and validated by the configured `ResponseHealer`. It never fails the request.
 */
import * as Effect from "effect/Effect"
import type { MessagesRequest } from "../messages/MessagesRequest.js"
import { type Message, messageText } from "../messages/Wire.js"
import type { PipelineStep } from "../routing/RoutePlanner.js"
import type { ResponseHealerService } from "./ResponseHealer.js"

const step = (summary: string): PipelineStep => ({ type: "plugin", name: "response-healing", summary })

/** The healed text in place of the first text block; the other text blocks go, thinking blocks stay first. */
const withText = (message: Message, text: string): Message => {
  const first = message.content.findIndex((b) => b.type === "text")
  return {
    ...message,
    content: message.content.flatMap((b, i) =>
      i === first ? [{ type: "text", text, citations: null }] : b.type === "text" ? [] : [b]
    )
  }
}

/** The message, healed when the request's format asks for it and a healer is configured; `steps` tells what happened. */
export const heal = (
  healer: ResponseHealerService | undefined,
  message: Message,
  request: MessagesRequest,
  steps: Array<PipelineStep>
): Effect.Effect<Message> => {
  const format = request.output_config?.format
  if (format === undefined || format === null) return Effect.succeed(message)
  if (healer === undefined) {
    steps.push(step("no response healer is configured; skipped"))
    return Effect.succeed(message)
  }
  return healer.heal(messageText(message), format.schema).pipe(
    Effect.map((healed) => {
      steps.push(
        step(healed.repaired ? "repaired the JSON answer; it matches the schema" : "the JSON answer was valid")
      )
      return healed.repaired ? withText(message, JSON.stringify(healed.value)) : message
    }),
    Effect.catchAll((e) => {
      steps.push(step(`could not repair the answer: ${e.message}`))
      return Effect.succeed(message)
    })
  )
}
