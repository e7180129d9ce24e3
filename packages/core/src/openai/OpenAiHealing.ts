/**
 * The response-healing plugin on chat completions: when the request asked for a `json_schema` response format, the
 * JSON answer's text (`choices[0].message.content`) is repaired and validated by the configured `ResponseHealer`. It
 * never fails the request.
 */
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import type { JsonObject } from "../messages/Wire.js"
import type { ResponseHealerService } from "../plugins/ResponseHealer.js"
import type { PipelineStep } from "../routing/RoutePlanner.js"

const step = (summary: string): PipelineStep => ({ type: "plugin", name: "response-healing", summary })

const schemaOf = (body: JsonObject): unknown => {
  const format = body.response_format
  if (!Predicate.isRecord(format) || format.type !== "json_schema" || !Predicate.isRecord(format.json_schema)) {
    return undefined
  }
  return format.json_schema.schema
}

/** The answer, its first choice's text healed when the request's format asks for it and a healer is configured. */
export const heal = (
  healer: ResponseHealerService | undefined,
  answer: JsonObject,
  request: JsonObject,
  steps: Array<PipelineStep>
): Effect.Effect<JsonObject> => {
  const schema = schemaOf(request)
  const choices = Array.isArray(answer.choices) ? answer.choices : []
  const first = Predicate.isRecord(choices[0]) ? choices[0] : undefined
  const message = Predicate.isRecord(first?.message) ? first.message : undefined
  if (schema === undefined || typeof message?.content !== "string") return Effect.succeed(answer)
  if (healer === undefined) {
    steps.push(step("no response healer is configured; skipped"))
    return Effect.succeed(answer)
  }
  return healer.heal(message.content, schema).pipe(
    Effect.map((healed) => {
      steps.push(
        step(healed.repaired ? "repaired the JSON answer; it matches the schema" : "the JSON answer was valid")
      )
      if (!healed.repaired) return answer
      const fixed = { ...first, message: { ...message, content: JSON.stringify(healed.value) } }
      return { ...answer, choices: [fixed, ...choices.slice(1)] }
    }),
    Effect.catchAll((e) => {
      steps.push(step(`could not repair the answer: ${e.message}`))
      return Effect.succeed(answer)
    })
  )
}
