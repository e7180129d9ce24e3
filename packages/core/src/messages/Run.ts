/**
 * One execution of a messages request (fusion runs several) and what it gives back: the vocabulary that the use
 * case's modules share.
 */
import type { CatalogueSnapshot } from "../catalogue/Catalogue.js"
import type * as Execution from "../execution/Execution.js"
import type { Plugins } from "../plugins/RequestPlugins.js"
import type { MessagesRequest } from "./MessagesRequest.js"
import type { JsonObject, Message } from "./Wire.js"

/** Everything one execution needs. */
export interface Run extends Execution.Execution {
  readonly request: MessagesRequest
  /** The body to forward (the client's, or as the preflight plugins rewrote it). */
  readonly body: JsonObject
  readonly modelId: string
  readonly plugins: Plugins
  /** The catalogue as the request saw it when it started. */
  readonly snapshot: CatalogueSnapshot
}

/** An execution's answer, with the message and its charge for fusion (JSON only). */
export type ExecutionResult = Execution.ExecutionResult<Message>
