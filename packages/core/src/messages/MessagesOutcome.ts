/** What the messages use case answers: the generic `Outcome` of an execution (see `execution/Outcome.ts`). */
import type { Outcome } from "../execution/Outcome.js"

export type { ClaimedFrames, FramePull } from "../execution/Outcome.js"
export { framesOf } from "../execution/Outcome.js"

/** One JSON message, or SSE frames read as pulls. */
export type MessagesOutcome = Outcome
