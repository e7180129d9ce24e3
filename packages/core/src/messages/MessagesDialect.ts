/**
 * The Anthropic Messages dialect of the executor: attempts called through the Upstream port's `createMessage` and
 * `streamMessage`, answers told with the catalogue's model id, the provider and the complete usage with its cost
 * (spec 2.2), stream events decorated where they carry the message or usage, `event: error` frames in band.
 */
import * as GatewayError from "../errors/GatewayError.js"
import type { Charge } from "../execution/Charging.js"
import type { Dialect, FrameContext, FrameDialect } from "../execution/Dialect.js"
import * as ResponseHealing from "../plugins/ResponseHealing.js"
import type { MessagesPorts } from "./MessagesPorts.js"
import type { Run } from "./Run.js"
import type { AttemptCalls } from "./UpstreamBody.js"
import * as UsageAccounting from "./UsageAccounting.js"
import { type JsonObject, type Message, sseFrame, type StreamEvent } from "./Wire.js"

const isContent = (event: StreamEvent): boolean => event.type === "content_block_delta" || event.type === "message_stop"

const isEnd = (event: StreamEvent): boolean => event.type === "message_stop"

const inBandError = (error: GatewayError.GatewayError, requestId: string): string =>
  sseFrame({
    type: "error",
    error: { type: GatewayError.describe(error).type, message: error.message },
    request_id: requestId
  })

/**
 * The content of a result with each text block's `citations` an array (spec 2.2): `[]` where the upstream sent none
 * (Anthropic leaves the key out, the chat completions translation gives `null`). The array itself when no block needs
 * it; the blocks are the upstream's otherwise.
 */
const withCitations = (content: ReadonlyArray<JsonObject>): ReadonlyArray<JsonObject> => {
  if (!Array.isArray(content)) return content
  let out: Array<JsonObject> | undefined
  for (let i = 0; i < content.length; i++) {
    const block = content[i]
    if (block.type === "text" && !Array.isArray(block.citations)) {
      out ??= content.slice()
      out[i] = Object.assign({}, block, { citations: [] })
    }
  }
  return out ?? content
}

/** The characters of a message's content: its text, thinking and tool calls' input (see `UntoldUsage`). */
const generatedIn = (message: Message): number => {
  let chars = 0
  for (const block of message.content) {
    if (typeof block.text === "string") chars += block.text.length
    else if (typeof block.thinking === "string") chars += block.thinking.length
    else if (block.type === "tool_use") {
      chars += String(block.name ?? "").length + JSON.stringify(block.input ?? {}).length
    }
  }
  return chars
}

/** The dialect of one messages run: its calls, and its plugins' part in the answer (response healing). */
export const make = (ports: MessagesPorts, run: Run, calls: AttemptCalls): Dialect<Message, StreamEvent> => ({
  json: calls.createMessage,
  open: calls.open,
  usage: (message) => UsageAccounting.billed(message.usage),
  generated: generatedIn,
  streamUsage: UsageAccounting.billed,
  finish: run.plugins["response-healing"] === undefined
    ? undefined
    : (message) => ResponseHealing.heal(ports.healer, message, run.request, run.steps),
  respond: (message, attempt, charge, pipeline) => {
    const out: JsonObject = Object.assign({}, message, {
      model: attempt.model.id,
      content: withCitations(message.content),
      stop_details: message.stop_details ?? null,
      container: message.container ?? null,
      usage: UsageAccounting.completeUsage(
        UsageAccounting.shownUsage(message.usage, charge.usage, run.extra),
        charge.cost
      ),
      context_management: message.context_management ?? null,
      provider: attempt.endpoint.provider,
      safeguard_results: message.safeguard_results ?? null
    })
    if (pipeline !== undefined) {
      out.service_metadata = { pipeline }
    }
    return out
  },
  frames: framesOf(run.extra)
})

/**
 * How a run's stream events are told. Made apart from `make` so that the frames, which live as long as the stream, do
 * not hold the run (its request and body, often hundreds of KB) through `make`'s closures.
 */
const framesOf = (extra: Charge | undefined): FrameDialect<StreamEvent> => ({
  isContent,
  isEnd,
  frame: (event, context) => decorated(extra, context, event),
  error: inBandError,
  trailer: "",
  unfinished: "upstream stream ended before message_stop"
})

/** One event as the client receives it: `message_start` and `message_delta` with the model, provider and usage. */
const decorated = (extra: Charge | undefined, context: FrameContext, event: StreamEvent): string => {
  switch (event.type) {
    case "message_start": {
      const message = (event.message ?? {}) as JsonObject
      context.state.usage = { ...(message.usage as JsonObject | undefined) }
      // An upstream that tells its usage only at the end (chat completions) gave none here: the prompt is shown as
      // estimated, as it would be billed, rather than as 0 (the real counts follow in `message_delta`).
      const sum = context.billed()
      const usage = UsageAccounting.completeUsage(
        UsageAccounting.shownUsage(context.state.usage, sum.usage, extra),
        "0"
      )
      // The cost is known at the end only (`message_delta` tells it): null here rather than the prompt's part, which
      // the Anthropic SDK's `finalMessage()` would keep as the answer's cost (it copies the tokens from
      // `message_delta`, not `cost`).
      usage.cost = null
      const out: JsonObject = Object.assign({}, message, {
        model: context.attempt.model.id,
        provider: context.attempt.endpoint.provider,
        usage
      })
      if (context.pipeline !== undefined) {
        out.service_metadata = { pipeline: context.pipeline }
      }
      return sseFrame({ ...event, message: out })
    }
    case "message_delta":
      return sseFrame({ ...event, usage: deltaUsage(extra, context, event.usage as JsonObject | undefined) })
    default: {
      const text = sseFrame(event)
      if (event.type === "content_block_delta") context.state.generated += text.length - DELTA_FRAME
      return text
    }
  }
}

/**
 * The length of a delta's frame around its content (that of an empty text delta): a delta's frame less this is about
 * the characters it carries (a few more for a tool's or thinking's delta, and for escapes), without reading it (most
 * are passed on unparsed). What a stream cut short is billed by (see `UntoldUsage`).
 */
const DELTA_FRAME = sseFrame({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "" } }).length

/** A `message_delta`'s usage: the upstream's, with the output tokens and cost so far (summed with fusion's). */
const deltaUsage = (extra: Charge | undefined, context: FrameContext, delta: JsonObject | undefined): JsonObject => {
  if (delta !== undefined) {
    for (const [k, value] of Object.entries(delta)) {
      if (value !== null) {
        context.state.usage[k] = value
      }
    }
  }
  const sum = context.billed()
  const shown: JsonObject = Object.assign({}, delta, { output_tokens: sum.usage.output, cost: Number(sum.cost) })
  if (extra !== undefined) {
    if (typeof delta?.input_tokens === "number") {
      shown.input_tokens = sum.usage.input
    }
    if (typeof delta?.cache_read_input_tokens === "number") {
      shown.cache_read_input_tokens = sum.usage.cacheRead
    }
    if (typeof delta?.cache_creation_input_tokens === "number") {
      shown.cache_creation_input_tokens = sum.usage.cacheWrite
    }
  }
  return shown
}
