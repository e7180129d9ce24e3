/** What the OpenAI dialects' frames are given in their tests: an attempt on `acme/gpt`, nothing charged yet. */
import { type FrameContext, type StreamState, streamState } from "../../src/execution/Dialect.js"
import type { Attempt } from "../../src/routing/RoutePlanner.js"

const nothing = () => ({ usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, cost: "0" })

/** The context a frame of `state` is decorated in (a new stream's by default). */
export const frameContext = (state: StreamState = streamState()): FrameContext => ({
  attempt: { model: { id: "acme/gpt" }, endpoint: { provider: "acme" } } as unknown as Attempt,
  state,
  charge: nothing,
  billed: nothing,
  pipeline: undefined,
  requestId: "req_1"
})
