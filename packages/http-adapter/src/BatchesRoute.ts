/**
 * The batch routes: submit (`POST /batches` → 202, status `validating`; the body read up to the batches' own limit,
 * 200 MiB by default, not the gateway's), list (`GET /batches`, newest first), read (`GET /batches/{id}`, with the
 * results of a terminal batch written out as they are read from the store), delete (`DELETE /batches/{id}`, terminal
 * batches only) and cancel (`POST /batches/{id}/cancel`). Errors use the generic body; every request is recorded in the
 * usage log.
 */
import type { GatewayError, UsageLog } from "@model-gateway/core"
import { Batch, BatchService } from "@model-gateway/core"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"
import type { GatewayResponse } from "./HttpTypes.js"
import { recorded } from "./Recorded.js"
import * as RequestHeaders from "./RequestHeaders.js"
import { jsonBodyOf } from "./RouteDispatcher.js"
import type * as RouteTable from "./RouteTable.js"

type Services = BatchService.Batches | UsageLog.UsageLog
type Request = RouteTable.AuthenticatedRequest<Services>

const json = (request: Request, status: number, body: unknown): GatewayResponse => ({
  status,
  headers: { "content-type": "application/json", "request-id": request.requestId },
  body: { _tag: "Text", text: JSON.stringify(body) }
})

/** A route of the family, recorded in the usage log. */
const route = (
  method: RouteTable.Method,
  path: string,
  answer: (
    request: Request,
    batches: BatchService.BatchesShape
  ) => Effect.Effect<GatewayResponse, GatewayError.GatewayError>
): RouteTable.Route<Services> => ({
  method,
  path,
  access: "key",
  family: "generic",
  handler: (request) => recorded(request, answer(request, Context.get(request.services, BatchService.Batches)))
})

/** The submission body, read up to the batches' limit and parsed. */
const submission = (request: Request, maxBytes: number) =>
  Effect.flatMap(request.request.bodyUpTo?.(maxBytes) ?? request.request.body, (bytes) => {
    const body = jsonBodyOf(request.request, bytes)
    return Either.isLeft(body) ? Effect.fail(body.left) : Effect.succeed(body.right)
  })

/** `POST /batches`: 202 with the batch record, status `validating`. */
export const create = route("POST", "/batches", (request, batches) =>
  submission(request, batches.maxBodyBytes).pipe(
    Effect.flatMap((body) =>
      batches.create({ principal: request.principal, app: RequestHeaders.app(request.request.headers) }, body)
    ),
    Effect.map((batch) => json(request, 202, Batch.toWire(batch)))
  ))

/** `GET /batches?limit&after&status&created_after&created_before`: a page, newest first, without results. */
export const list = route(
  "GET",
  "/batches",
  (request, batches) =>
    Effect.map(batches.list(request.principal, request.query), (page) =>
      json(request, 200, {
        object: "list",
        data: page.batches.map((batch) => Batch.toWire(batch)),
        first_id: page.batches[0]?.id ?? null,
        last_id: page.batches.at(-1)?.id ?? null,
        has_more: page.hasMore
      }))
)

/** A terminal batch's record with its results, written out a page of results at a time. */
const withResults = (request: Request, view: BatchService.BatchView, results: Stream.Stream<Batch.ItemResult>) => {
  const { results: _none, ...record } = Batch.toWire(view.batch)
  const head = `${JSON.stringify(record).slice(0, -1)},"results":[`
  const items = results.pipe(
    Stream.mapChunks((chunk) =>
      Chunk.of(Chunk.join(Chunk.map(chunk, (r) => JSON.stringify(Batch.resultToWire(r))), ","))
    ),
    Stream.filter((text) => text !== ""),
    Stream.mapAccum(true, (first, text) => [false, first ? text : `,${text}`] as const)
  )
  const response: GatewayResponse = {
    status: 200,
    headers: { "content-type": "application/json", "request-id": request.requestId },
    body: { _tag: "Stream", stream: Stream.concat(Stream.make(head), Stream.concat(items, Stream.make("]}"))) }
  }
  return response
}

/** `GET /batches/{id}`: the record; a terminal batch's has its results, one per request in submission order. */
export const get = route(
  "GET",
  "/batches/{id}",
  (request, batches) =>
    Effect.map(batches.get(request.principal, request.params.id), (view) =>
      view.results === undefined
        ? json(request, 200, Batch.toWire(view.batch))
        : withResults(request, view, view.results))
)

/** `DELETE /batches/{id}`: the deleted-batch record; 409 while the batch is in progress. */
export const remove = route("DELETE", "/batches/{id}", (request, batches) =>
  Effect.map(
    batches.remove(request.principal, request.params.id),
    ({ batch, deletedAt }) => json(request, 200, Batch.deletedToWire(batch, deletedAt))
  ))

/** `POST /batches/{id}/cancel`: the record, `cancelling` (then `cancelled` once its running requests finish). */
export const cancel = route(
  "POST",
  "/batches/{id}/cancel",
  (request, batches) =>
    Effect.map(batches.cancel(request.principal, request.params.id), (batch) => json(request, 200, Batch.toWire(batch)))
)

/** Every batch route. */
export const routes: ReadonlyArray<RouteTable.Route<Services>> = [create, list, get, remove, cancel]
