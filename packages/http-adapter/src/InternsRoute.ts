/**
 * The intern routes, as `@openrouter/sdk`'s `interns` calls them: list (`GET /interns`), create (`POST /interns`,
 * honouring `Idempotency-Key`: 201, or 200 for a replay), get and update (`GET` / `PATCH /interns/{internId}`),
 * provision (202 `{"provisioning":true}`), suspend (200 `{"suspended":true}`), delete (202 `{"deleting":true}`), and
 * `GET /interns/{internId}/daemon-access` (`{origin, token}`, never cached). The interns use case checks who may see
 * what (a key outside the programme gets 404 everywhere); errors use the generic body with its reason.
 */
import type { GatewayError, UsageLog } from "@model-gateway/core"
import { Intern, InternService } from "@model-gateway/core"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { GatewayResponse } from "./HttpTypes.js"
import { header } from "./HttpTypes.js"
import { recorded } from "./Recorded.js"
import { jsonBodyOf } from "./RouteDispatcher.js"
import type * as RouteTable from "./RouteTable.js"

type Services = InternService.Interns | UsageLog.UsageLog
type Request = RouteTable.AuthenticatedRequest<Services>

const json = (
  request: Request,
  status: number,
  body: unknown,
  extra: Record<string, string> = {}
): GatewayResponse => ({
  status,
  headers: { "content-type": "application/json", "request-id": request.requestId, ...extra },
  body: { _tag: "Text", text: JSON.stringify(body) }
})

const callerOf = (request: Request): InternService.InternCaller => ({
  principal: request.principal,
  requestId: request.requestId,
  host: header(request.request.headers, "host")
})

const interns = (request: Request) => Context.get(request.services, InternService.Interns)

/** A route of the family, recorded in the usage log. */
const route = (
  method: RouteTable.Method,
  path: string,
  answer: (
    request: Request,
    interns: InternService.InternsShape
  ) => Effect.Effect<GatewayResponse, GatewayError.GatewayError>,
  body?: "json"
): RouteTable.Route<Services> => ({
  method,
  path,
  access: "key",
  family: "generic",
  ...(body === undefined ? {} : { body }),
  handler: (request) => recorded(request, answer(request, interns(request)))
})

/** `GET /interns?status=a,b&limit&starting_after&workspace_id`: `{data, has_more, next_cursor?}`, newest first. */
export const list = route(
  "GET",
  "/interns",
  (request, service) =>
    Effect.map(service.list(callerOf(request), request.query), (page) =>
      json(request, 200, {
        data: page.interns.map(Intern.toWire),
        has_more: page.hasMore,
        ...(page.nextCursor === undefined ? {} : { next_cursor: page.nextCursor })
      }))
)

/** `POST /interns`: 201 with the new intern; 200 with the same intern when `Idempotency-Key` replays a create. */
export const create = route(
  "POST",
  "/interns",
  (request, service) =>
    Effect.map(
      service.create(callerOf(request), request.body, header(request.request.headers, "idempotency-key")),
      ({ created, intern }) => json(request, created ? 201 : 200, Intern.toWire(intern))
    ),
  "json"
)

/** `GET /interns/{internId}`. */
export const get = route(
  "GET",
  "/interns/{internId}",
  (request, service) =>
    Effect.map(
      service.get(callerOf(request), request.params.internId),
      (intern) => json(request, 200, Intern.toWire(intern))
    )
)

/** `PATCH /interns/{internId}`: `name`, `description`, `instructions`, `model`. */
export const update = route(
  "PATCH",
  "/interns/{internId}",
  (request, service) =>
    Effect.map(
      service.update(callerOf(request), request.params.internId, request.body),
      (intern) => json(request, 200, Intern.toWire(intern))
    ),
  "json"
)

/** The body of a DELETE, if it has one (the SDK sends `{"acknowledge_workspace_loss": false}`). */
const optionalJson = (request: Request) =>
  Effect.flatMap(request.request.body, (bytes) => {
    if (bytes.byteLength === 0) return Effect.succeed(undefined)
    const body = jsonBodyOf(request.request, bytes)
    return body._tag === "Left" ? Effect.fail(body.left) : Effect.succeed(body.right)
  })

/** `DELETE /interns/{internId}`: 202 `{"deleting":true}`; the intern is gone once its runtime has released it. */
export const remove = route("DELETE", "/interns/{internId}", (request, service) =>
  optionalJson(request).pipe(
    Effect.flatMap((body) => service.remove(callerOf(request), request.params.internId, body)),
    Effect.as(json(request, 202, { deleting: true }))
  ))

/** `POST /interns/{internId}/provision`: 202 `{"provisioning":true}`; progress shows on the intern. */
export const provision = route(
  "POST",
  "/interns/{internId}/provision",
  (request, service) =>
    Effect.as(service.provision(callerOf(request), request.params.internId), json(request, 202, { provisioning: true }))
)

/** `POST /interns/{internId}/suspend`: 200 `{"suspended":true}` once its daemon has stopped. */
export const suspend = route(
  "POST",
  "/interns/{internId}/suspend",
  (request, service) =>
    Effect.as(service.suspend(callerOf(request), request.params.internId), json(request, 200, { suspended: true }))
)

/** `GET /interns/{internId}/daemon-access`: `{origin, token}` of a running intern, with `Cache-Control: no-store`. */
export const daemonAccess = route("GET", "/interns/{internId}/daemon-access", (request, service) =>
  Effect.map(
    service.daemonAccess(callerOf(request), request.params.internId),
    ({ origin, token }) => json(request, 200, { origin, token }, { "cache-control": "no-store", pragma: "no-cache" })
  ))

/** Every intern route but the chat. */
export const routes: ReadonlyArray<RouteTable.Route<Services>> = [
  list,
  create,
  get,
  update,
  remove,
  provision,
  suspend,
  daemonAccess
]
