/**
 * What the HTTP layer tells the messages use case about a request besides its body: who asked, and what the
 * headers said.
 */
import type { Principal } from "../auth/Keys.js"
import type { Progress } from "../execution/Progress.js"
import type { ForwardHeaders } from "../upstream/Upstream.js"

/** Who asked, and what the HTTP layer learnt from headers. */
export interface RequestContext {
  readonly requestId: string
  /** The route that took the request, method and pattern (`POST /v1/messages`), for the usage log. */
  readonly route: string
  readonly principal: Principal
  /** From the `x-session-id` header; a `session_id` in the body wins. */
  readonly sessionId?: string | undefined
  /** `X-Service-Metadata: enabled` (or a legacy alias) was sent. */
  readonly metadata: boolean
  readonly headers: ForwardHeaders
  /** Size of the raw body, for a cheap prompt-size bound. */
  readonly bodyBytes?: number | undefined
  /** Multiplies every cost of the request (a decimal string: "0.5" halves it); batch pricing. None by default. */
  readonly priceFactor?: string | undefined
  readonly app: {
    readonly referer?: string | undefined
    readonly title?: string | undefined
    readonly categories?: string | undefined
  }
  /** Where the request has come to, when its binding can tell that its client went away (see `Progress`). */
  readonly progress?: Progress | undefined
}
