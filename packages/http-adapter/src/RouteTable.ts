/**
 * The route table: each route declared once, as data (method, OpenAPI-style path pattern, who may call it, the
 * family of its error bodies, what it reads, its handler), and matched by Effect's own radix router
 * (`find-my-way-ts`, the one `@effect/platform` uses) built once when the table is made. `RouteDispatcher` turns a
 * table into a request handler.
 */
import type { GatewayError, Keys } from "@model-gateway/core"
import type * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as FindMyWay from "find-my-way-ts"
import * as QueryString from "find-my-way-ts/QueryString"
import type { Family } from "./ErrorResponses.js"
import type { GatewayRequest, GatewayResponse } from "./HttpTypes.js"

export type { Family } from "./ErrorResponses.js"

export type Method = "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE"

/** Who may call a route: anyone, any valid key, or management keys only (others get 403). */
export type Access = "public" | "key" | "management"

/** A path's parameters by name, decoded (`/batches/{id}` gives `id`): every parameter of the matched pattern. */
export type Params = Readonly<Record<string, string>>

/** The query string, parsed; a repeated key gives an array. */
export type Query = Readonly<Record<string, string | ReadonlyArray<string>>>

/** What a handler is given: the request, and what the dispatcher learnt of it before the handler runs. */
export interface RouteRequest<R = never> {
  readonly request: GatewayRequest
  readonly requestId: string
  /** The route's method and full pattern, e.g. `POST /v1/messages`: its name in the usage log. */
  readonly route: string
  readonly params: Params
  readonly query: Query
  /** The parsed body, for a route declared with `body: "json"`; undefined otherwise. */
  readonly body: unknown
  /** The body's size in bytes; 0 when the route reads no body. */
  readonly bodyBytes: number
  /** The `x-session-id` header, for a route declared with `session: true`; undefined otherwise. */
  readonly sessionId: string | undefined
  /**
   * The services the handler needs, read once by the dispatcher. On a hot path `Context.get(request.services, Tag)`
   * is free where `Effect.flatMap(Tag, ...)` costs a few steps of the fiber's run loop.
   */
  readonly services: Context.Context<R>
}

/** What the handler of a `key` or `management` route is given: also who is calling. */
export interface AuthenticatedRequest<R = never> extends RouteRequest<R> {
  readonly principal: Keys.Principal
}

export type RouteResult<R> = Effect.Effect<GatewayResponse, GatewayError.GatewayError, R>

interface RouteFields {
  readonly method: Method
  /** OpenAPI-style pattern, `/batches/{id}`; a parameter is a whole segment. */
  readonly path: string
  /** The error body of the route's failures, and of a wrong method on its path. */
  readonly family: Family
  /**
   * `"json"`: the dispatcher reads the body and parses it as JSON (Content-Type `application/json` or `+json`)
   * before the handler runs; a wrong type or malformed JSON is a 400, a body past the binding's limit a 413.
   */
  readonly body?: "json" | undefined
  /** The route takes a session id from `x-session-id` (at most 256 characters, else 400). */
  readonly session?: boolean | undefined
}

export interface PublicRoute<R> extends RouteFields {
  readonly access: "public"
  readonly handler: (request: RouteRequest<R>) => RouteResult<R>
}

export interface KeyedRoute<R> extends RouteFields {
  readonly access: "key" | "management"
  readonly handler: (request: AuthenticatedRequest<R>) => RouteResult<R>
}

/** A route: what it answers, who may call it, how it fails, and its handler. */
export type Route<R = never> = PublicRoute<R> | KeyedRoute<R>

/** The same routes under a path prefix (`/v1`); the prefix of none is "". */
export const prefixed = <R>(prefix: string, routes: ReadonlyArray<Route<R>>): ReadonlyArray<Route<R>> =>
  routes.map((route) => ({ ...route, path: route.path === "/" ? prefix || "/" : `${prefix}${route.path}` }))

/** A route as the dispatcher runs it. */
export interface Compiled<R> {
  readonly route: Route<R>
  /** `POST /v1/messages` */
  readonly name: string
  /** Takes the principal too for a public route, as undefined: one shape of request for every route. */
  readonly handler: (request: RouteRequest<R> & { readonly principal: Keys.Principal | undefined }) => RouteResult<R>
}

/** A path pattern and the routes on it, by method. */
export interface PathEntry<R> {
  readonly pattern: string
  readonly family: Family
  /** The methods served, for an `Allow` header. */
  readonly allow: string
  readonly methods: ReadonlyMap<string, Compiled<R>>
}

export interface Table<R> {
  readonly routes: ReadonlyArray<Route<R>>
  /** The path entry for a request path without its query, and its parameters; undefined for none. */
  readonly find: (path: string) => { readonly handler: PathEntry<R>; readonly params: Params } | undefined
  /** The family of a path no route matches, for its 404 (see `familyOf`). */
  readonly familyOf: (path: string) => Family
}

const PARAM = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/

const segmentsOf = (path: string): ReadonlyArray<string> => path.split("/").filter((s) => s !== "")

/** The router's form of a pattern, `/batches/:id`; throws on a malformed pattern (at start-up). */
export const toRouterPath = (pattern: string): FindMyWay.PathInput => {
  if (!pattern.startsWith("/")) throw new Error(`Route pattern must start with "/": ${pattern}`)
  const segments = pattern.split("/").slice(1).map((segment) => {
    const param = PARAM.exec(segment)
    if (param !== null) return `:${param[1]}`
    if (/[{}:*]/.test(segment)) throw new Error(`Route pattern ${pattern}: a parameter must be a whole segment`)
    return segment
  })
  return `/${segments.join("/")}`
}

/**
 * The family of a path no route matches: that of the declared patterns sharing the most leading segments with it (a
 * parameter shares any segment), when they all have the same; generic otherwise. `/v1/messages/x` is messages,
 * `/v1/chat/x` openai, `/v1/x` (shared with every route) and `/x` generic.
 */
export const familyOf = (
  patterns: ReadonlyArray<{ readonly path: string; readonly family: Family }>,
  path: string
): Family => {
  const wanted = segmentsOf(path)
  let best = 0
  let family: Family = "generic"
  for (const route of patterns) {
    const segments = segmentsOf(route.path)
    let shared = 0
    while (
      shared < segments.length && shared < wanted.length &&
      (segments[shared] === wanted[shared] || PARAM.test(segments[shared]))
    ) shared++
    if (shared > best) {
      best = shared
      family = route.family
    } else if (shared === best && shared > 0 && route.family !== family) {
      family = "generic"
    }
  }
  return family
}

const compile = <R>(route: Route<R>): Compiled<R> => ({
  route,
  name: `${route.method} ${route.path}`,
  handler: route.handler as Compiled<R>["handler"]
})

/**
 * Makes a table: the radix router is built here, once. Throws when a route is declared twice, a pattern is
 * malformed, or the routes of one path disagree on their family.
 */
export const make = <R>(routes: ReadonlyArray<Route<R>>): Table<R> => {
  const entries = new Map<string, { pattern: string; family: Family; methods: Map<string, Compiled<R>> }>()
  for (const route of routes) {
    // One entry per path shape: `/interns/{id}` and `/interns/{internId}` are the same path to the router.
    const key = toRouterPath(route.path).replace(/:[^/]+/g, ":")
    const entry = entries.get(key) ?? { pattern: route.path, family: route.family, methods: new Map() }
    if (entry.pattern !== route.path) {
      throw new Error(`${route.path} and ${entry.pattern} are one path: name their parameters alike`)
    }
    if (entry.methods.has(route.method)) throw new Error(`Route declared twice: ${route.method} ${route.path}`)
    if (entry.family !== route.family) {
      throw new Error(`Routes on ${route.path} disagree on their error family (${entry.family}, ${route.family})`)
    }
    entry.methods.set(route.method, compile(route))
    entries.set(key, entry)
  }
  // One tree keyed by path, not by method: a path found with a method it lacks is a 405 with its `Allow`, at no cost.
  // Case-sensitive, and `//` not folded: paths match exactly as before the table; a trailing slash is tolerated.
  const router = FindMyWay.make<PathEntry<R>>({
    caseSensitive: true,
    ignoreTrailingSlash: true,
    ignoreDuplicateSlashes: false
  })
  for (const { family, methods, pattern } of entries.values()) {
    router.on(ANY, toRouterPath(pattern), { pattern, family, allow: [...methods.keys()].join(", "), methods })
  }
  return {
    routes,
    // The router's own result, whose parameters are typed as maybe missing: those of a matched pattern never are.
    find: (path) => router.find(ANY, path) as { readonly handler: PathEntry<R>; readonly params: Params } | undefined,
    familyOf: (path) => familyOf(routes, path)
  }
}

const ANY = "ANY"

const NO_QUERY: Query = Object.freeze({})

/** The query string (without its `?`) parsed; a repeated key gives an array. */
export const parseQuery = (query: string | undefined): Query =>
  query === undefined || query === "" ? NO_QUERY : QueryString.parse(query)
