/**
 * How far a request has come, for the one line it leaves when its client goes away before its answer: status 499, as
 * nginx logs a request its client closed, with no usage record (nothing was served, nothing is billed, and what it had
 * reserved of its limits is given back). A binding that can tell that its client went away makes one per request; the
 * dispatcher notes when the request was taken and who asked, the executor the attempt in flight, and the usage record
 * that the request has its answer. Plain property writes on the way, no Effect: it is read only when the request's
 * fiber was interrupted.
 */
import type { Principal } from "../auth/Keys.js"
import type { Attempt } from "../routing/RoutePlanner.js"

export class Progress {
  /** When the request was taken (epoch ms, by the runtime's clock). */
  started = 0
  /** Who asked, once the key is checked. */
  principal: Principal | undefined = undefined
  /** The upstream attempt in flight (its model and provider), and the request's attempts so far, counting it. */
  attempt: Attempt | undefined = undefined
  attempts = 0
  stream = false
  /** The request has its usage record (its answer, a refusal, a failure): a client leaving now leaves no 499. */
  answered = false
}
