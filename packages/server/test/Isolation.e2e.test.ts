/**
 * Workspace isolation, walked over the whole route table (`GatewayHttp.apiRoutes`, so a route added later is walked
 * too): with a second workspace's key, every route that names a workspace's resource answers 404 for the first
 * workspace's resource (never a 403 that would confirm it exists) and changes nothing, every management-only route
 * answers 403 to a regular key, and no answer to the second workspace mentions the first one's resources.
 */
import type { InternRuntime } from "@model-gateway/core"
import { GatewayHttp, type RouteTable } from "@model-gateway/http-adapter"
import { Effect, Option, Stream } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Answer, InternsHarness } from "./InternsHarness.js"
import { ADMIN_KEY, call, MEMBER_KEY, OTHER_KEY, startInternsHarness } from "./InternsHarness.js"

/** Interns "provisioned" at once, without daemons. */
const runtime: InternRuntime.InternRuntimeService = {
  provision: () => Stream.make({ _tag: "Ready", hostname: "127.0.0.1" } as const),
  suspend: () => Effect.void,
  destroy: () => Effect.void,
  access: () => Effect.succeed(Option.none())
}

let h: InternsHarness
const v1 = (path: string) => `${h.url}/v1${path}`

/** A workspace resource a route may name, created by the first workspace (`acme`) with `MEMBER_KEY`. */
interface Resource {
  /** Whether a route's path names this kind of resource. */
  readonly names: (path: string) => boolean
  readonly create: () => Promise<string>
  /** The owner's view of it, to check that the other workspace changed nothing. */
  readonly view: (id: string) => Promise<Answer>
}

const resources: ReadonlyArray<Resource> = [
  {
    names: (path) => path.startsWith("/interns/{internId}"),
    create: async () => {
      const created = await call(v1("/interns"), {
        method: "POST",
        key: MEMBER_KEY,
        body: { name: "Acme's intern", provision: true }
      })
      expect(created.status).toBe(201)
      return created.body.id as string
    },
    view: (id) => call(v1(`/interns/${id}`), { key: MEMBER_KEY })
  },
  {
    names: (path) => path.startsWith("/batches/{id}"),
    create: async () => {
      const created = await call(v1("/batches"), {
        method: "POST",
        key: MEMBER_KEY,
        body: {
          endpoint: "/v1/messages",
          model: "anthro/claude",
          completion_window: "24h",
          requests: [{
            custom_id: "only",
            body: { max_tokens: 8, messages: [{ role: "user", content: "hi" }] }
          }]
        }
      })
      expect(created.status).toBe(202)
      return created.body.id as string
    },
    view: (id) => call(v1(`/batches/${id}`), { key: MEMBER_KEY })
  }
]

/** Parameters that name the shared catalogue, not a workspace's resource: the same for every workspace. */
const catalogue = (path: string) => /^\/models?\//.test(path)

/** The catalogue's parameters, naming one model of it. */
const catalogueParams: Record<string, string> = { author: "anthro", slug: "claude", id: "anthro%2Fclaude" }

/** A body each route would accept from its owner, so that only the workspace check can refuse it. */
const bodyFor = (route: RouteTable.Route<GatewayHttp.Services>): unknown => {
  if (route.method === "GET" || route.method === "HEAD") return undefined
  if (route.path.endsWith("/chat/completions")) return { messages: [{ role: "user", content: "hi" }] }
  if (route.method === "PATCH") return { name: "Renamed by another workspace" }
  return {}
}

beforeAll(async () => {
  h = await startInternsHarness({ runtime })
})
afterAll(() => h.close())

describe("workspace isolation, walked over every route", () => {
  it("every route is classified: its parameters name a workspace resource or the shared catalogue", () => {
    for (const route of GatewayHttp.apiRoutes) {
      if (!route.path.includes("{")) continue
      const known = catalogue(route.path) || resources.some((r) => r.names(route.path))
      expect(known, `${route.method} ${route.path}: a parameter this test does not know; classify it`).toBe(true)
    }
  })

  it("another workspace's resource is a 404 on every route that names it, and nothing changes", async () => {
    const owned = new Map<Resource, string>()
    const walked: Array<string> = []
    // Mutations last (DELETE at the very end), so that each route is tried against a resource that exists.
    const order = (route: RouteTable.Route<GatewayHttp.Services>) =>
      route.method === "DELETE" ? 2 : route.method === "GET" ? 0 : 1
    const routes = [...GatewayHttp.apiRoutes].sort((a, b) => order(a) - order(b))
    for (const route of routes) {
      const resource = resources.find((r) => r.names(route.path))
      if (resource === undefined) continue
      let id = owned.get(resource)
      if (id === undefined) {
        id = await resource.create()
        owned.set(resource, id)
      }
      const path = route.path.replace(/\{[^}]+\}/, id)
      const answer = await call(v1(path), { method: route.method, key: OTHER_KEY, body: bodyFor(route) })
      expect(answer.status, `${route.method} ${path} with another workspace's key`).toBe(404)
      expect(answer.body.error, `${route.method} ${path}`).toMatchObject({
        code: 404,
        metadata: { reason: "not_found", retryable: false }
      })
      walked.push(`${route.method} ${route.path}`)
    }
    // Interns: get, update, delete, provision, suspend, daemon access, chat (and whatever is added later).
    expect(walked.length).toBeGreaterThanOrEqual(7)
    for (const [resource, id] of owned) {
      const view = await resource.view(id)
      expect(view.status, "the owner still sees it").toBe(200)
      expect(JSON.stringify(view.body)).not.toContain("Renamed by another workspace")
    }
  })

  it("management-only routes refuse a regular key with 403; no answer to another workspace names a resource", async () => {
    const intern = await resources[0]!.create()
    let managementOnly = 0
    for (const route of GatewayHttp.apiRoutes) {
      if (route.method === "DELETE") continue
      const path = route.path.replace(
        /\{([^}]+)\}/g,
        (_, name: string) => catalogue(route.path) ? catalogueParams[name]! : intern
      )
      const answer = await call(v1(path), { method: route.method, key: OTHER_KEY, body: bodyFor(route) })
      expect(answer.status, `${route.method} ${path}`).toBeLessThan(500)
      if (route.access === "management") {
        managementOnly++
        expect(answer.status, `${route.method} ${path} with a regular key`).toBe(403)
        const again = await call(v1(path), { method: route.method, key: ADMIN_KEY, body: bodyFor(route) })
        expect(again.status, `${route.method} ${path} with a management key`).not.toBe(403)
      }
      if (answer.status !== 404) {
        expect(JSON.stringify(answer.body), `${route.method} ${path}`).not.toContain(intern)
        expect(JSON.stringify(answer.body), `${route.method} ${path}`).not.toContain("Acme's intern")
      }
    }
    expect(managementOnly).toBeGreaterThanOrEqual(1)
  })
})
