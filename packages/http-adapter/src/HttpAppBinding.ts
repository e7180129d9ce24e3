/**
 * The `@effect/platform` binding: the gateway as an `HttpApp`, to mount in an Effect HTTP server
 * or router (`HttpRouter.mountApp`). Convenient for Effect users; the node listener is leaner.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { GatewayError } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { GatewayResponse, Handler } from "./GatewayHttp.js"
import { bytesOf } from "./HttpTypes.js"

export interface HttpAppOptions {
  /** Largest accepted request body in bytes; default 32 MiB. */
  readonly maxBodyBytes?: number | undefined
  /** A prefix stripped before routing (use when mounted with `HttpRouter.mountApp` without stripping). */
  readonly mountPath?: string | undefined
}

const toServerResponse = (response: GatewayResponse): HttpServerResponse.HttpServerResponse => {
  const { "content-type": contentType, ...headers } = response.headers
  switch (response.body._tag) {
    case "Text":
      return HttpServerResponse.text(response.body.text, { status: response.status, headers, contentType })
    case "Empty":
      return HttpServerResponse.empty({ status: response.status, headers })
    case "Stream":
      return HttpServerResponse.stream(Stream.encodeText(response.body.stream), {
        status: response.status,
        headers,
        contentType
      })
    case "Bytes":
      return HttpServerResponse.stream(bytesOf(response.body.open), { status: response.status, headers, contentType })
  }
}

/** The gateway as an HttpApp. */
export const make = (handler: Handler, options: HttpAppOptions = {}) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const limit = options.maxBodyBytes ?? 32 * 1024 * 1024
    const url = new URL(request.url, "http://localhost")
    let path = url.pathname
    if (options.mountPath !== undefined && path.startsWith(options.mountPath)) {
      path = path.slice(options.mountPath.length) || "/"
    }
    const bodyUpTo = (max: number) =>
      Effect.suspend(() => {
        const tooLarge = () =>
          Effect.fail(new GatewayError.PayloadTooLarge({ message: `Request body exceeds the limit of ${max} bytes` }))
        const declared = Number(request.headers["content-length"])
        if (Number.isFinite(declared) && declared > max) return tooLarge()
        return request.arrayBuffer.pipe(
          Effect.mapError((e) =>
            new GatewayError.InvalidRequest({ message: `Could not read request body: ${e.message}` })
          ),
          Effect.flatMap((buffer) => buffer.byteLength > max ? tooLarge() : Effect.succeed(new Uint8Array(buffer)))
        )
      })
    const response = yield* handler({
      method: request.method,
      path,
      query: url.search.slice(1),
      headers: request.headers,
      body: bodyUpTo(limit),
      bodyUpTo
    })
    return toServerResponse(response)
  })
