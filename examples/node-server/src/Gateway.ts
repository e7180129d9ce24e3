/**
 * The composition root: wires the core use cases to the adapters a configuration names, builds the
 * runtime once, and exposes the gateway as a node request listener, a web fetch handler and an
 * `@effect/platform` HttpApp. Embedders call `makeGateway`; the example server calls `startServer`.
 */
import {
  Catalogue,
  type EndpointStats,
  Keys,
  MessagesService,
  Moderation,
  type SessionAffinity,
  type UsageLog,
  WebSearch
} from "@model-gateway/core"
import type { Upstream } from "@model-gateway/core"
import type { GatewayHttp } from "@model-gateway/http-adapter"
import { FetchBinding, GatewayHttp as Http, HttpAppBinding, NodeBinding } from "@model-gateway/http-adapter"
import { JsonSchemaHealer, OpenAiModeration, PdfDocumentParser, UpstreamRouter } from "@model-gateway/provider-adapters"
import { StorageMemory } from "@model-gateway/storage-memory"
import { SqlStorage } from "@model-gateway/storage-sql"
import type { Clock } from "effect"
import { Effect, Layer, ManagedRuntime, RuntimeFlags } from "effect"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import type { GatewayConfig } from "./Config.js"
import { catalogueModels, providerConfigs } from "./Config.js"

export interface GatewayOptions {
  /** Storage URL: `memory:`, `sqlite:PATH`, `sqlite::memory:`, `postgres://...`. Defaults to the config's. */
  readonly storage?: string | undefined
  /** Replace provider adapters by name (tests, custom adapters). */
  readonly upstreams?: Readonly<Record<string, Upstream.UpstreamService>> | undefined
  /** Strip this prefix before routing, when mounted under a path in another server. */
  readonly mountPath?: string | undefined
  /** A search provider for the `web` / `web-fetch` plugins (none by default). */
  readonly webSearch?: WebSearch.WebSearchService | undefined
  /** Replaces the runtime's clock (tests that move time forward). */
  readonly clock?: Clock.Clock | undefined
}

/** The moderation adapter the configuration names, if any. */
const moderationLayer = (config: GatewayConfig): Layer.Layer<never> | Layer.Layer<Moderation.Moderation> => {
  const m = config.moderation
  if (m === undefined) return Layer.empty
  return m.kind === "blocklist"
    ? Layer.succeed(Moderation.Moderation, Moderation.blocklist(m.terms))
    : OpenAiModeration.layer({ baseUrl: m.baseUrl, apiKey: m.apiKey, model: m.model })
}

export type Stores = Keys.Keys | UsageLog.UsageLog | EndpointStats.EndpointStats | SessionAffinity.SessionAffinity

/** The storage adapters for a storage URL. */
export const storageLayer = (url: string): Layer.Layer<Stores, unknown> =>
  url === "memory:" || url === "memory" ? StorageMemory.layer() : SqlStorage.layerFromUrl(url)

export type GatewayServices = MessagesService.MessagesService | Catalogue.Catalogue | Upstream.Upstream | Stores

/** The whole gateway as one Layer: the messages use case over catalogue, upstreams and storage. */
export const gatewayLayer = (
  config: GatewayConfig,
  options: GatewayOptions = {}
): Layer.Layer<GatewayServices, unknown> => {
  const snapshot = Catalogue.makeSnapshot(catalogueModels(config))
  const ports = Layer.mergeAll(
    Layer.succeed(Catalogue.Catalogue, Catalogue.fromSnapshot(snapshot)),
    UpstreamRouter.layer({ ...providerConfigs(config), ...options.upstreams }),
    storageLayer(options.storage ?? config.storage)
  )
  const plugins = Layer.mergeAll(
    JsonSchemaHealer.layer(),
    PdfDocumentParser.layer(),
    moderationLayer(config),
    options.webSearch === undefined ? Layer.empty : Layer.succeed(WebSearch.WebSearch, options.webSearch)
  )
  const messages = MessagesService.layer({
    routerSlug: config.autoRouter.slug,
    fusion: config.fusion
  })
  const gateway = messages.pipe(
    Layer.provide(plugins),
    Layer.provideMerge(ports),
    // Effect's built-in fiber metrics (started, active, lifetimes) cost every request's fiber a few µs, and nothing
    // here reads them.
    Layer.merge(RuntimeFlags.disableRuntimeMetrics)
  )
  return options.clock === undefined ? gateway : Layer.merge(gateway, Layer.setClock(options.clock))
}

export interface Gateway {
  readonly runtime: ManagedRuntime.ManagedRuntime<GatewayServices, unknown>
  readonly handler: GatewayHttp.Handler
  /** A `node:http` request listener. */
  readonly listener: ReturnType<typeof NodeBinding.makeListener>
  /** A web-standard fetch handler. */
  readonly fetch: (request: Request) => Promise<Response>
  /** The gateway as an `@effect/platform` HttpApp (provide the runtime's services when serving it). */
  readonly httpApp: ReturnType<typeof HttpAppBinding.make>
  /** Flushes usage records and closes storage and upstream pools. */
  readonly dispose: () => Promise<void>
}

/** Builds a gateway from a configuration: storage migrated, configured keys provisioned. */
export const makeGateway = async (config: GatewayConfig, options: GatewayOptions = {}): Promise<Gateway> => {
  const runtime = ManagedRuntime.make(gatewayLayer(config, options))
  await runtime.runPromise(Effect.flatMap(Keys.Keys, (keys) =>
    Effect.forEach(config.keys, (k) =>
      keys.provision({
        secret: k.key,
        workspace: k.workspace,
        management: k.management,
        interns: k.interns,
        label: k.label
      }), { discard: true })))
  const handler = Http.makeHandler({ basePath: config.server.basePath })
  const bindingOptions = { maxBodyBytes: config.server.maxBodyBytes, mountPath: options.mountPath }
  return {
    runtime,
    handler,
    listener: NodeBinding.makeListener(runtime, handler, bindingOptions),
    fetch: FetchBinding.makeFetchHandler(runtime, handler, bindingOptions),
    httpApp: HttpAppBinding.make(handler, bindingOptions),
    dispose: () => runtime.dispose()
  }
}

export interface RunningServer {
  readonly gateway: Gateway
  readonly server: Server
  /** `http://host:port` */
  readonly url: string
  /** Graceful: stops accepting, lets in-flight requests and streams finish (up to `graceMs`), then disposes. */
  readonly close: (graceMs?: number) => Promise<void>
}

/** Starts the gateway on its own `node:http` server. Port 0 picks a free port. */
export const startServer = async (
  config: GatewayConfig,
  options: GatewayOptions & { readonly host?: string; readonly port?: number } = {}
): Promise<RunningServer> => {
  const gateway = await makeGateway(config, options)
  const server = createServer({ keepAliveTimeout: 65_000 }, gateway.listener)
  const host = options.host ?? config.server.host
  const port = options.port ?? config.server.port
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(port, host, () => {
      server.off("error", reject)
      resolve()
    })
  })
  const address = server.address() as AddressInfo
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address
  let closing: Promise<void> | undefined
  const close = (graceMs = 30_000) =>
    closing ??= new Promise<void>((resolve) => {
      const timer = setTimeout(() => server.closeAllConnections(), graceMs)
      // keep-alive connections become idle as their in-flight responses finish: close them as they do
      const sweep = setInterval(() => server.closeIdleConnections(), 100)
      server.close(() => {
        clearTimeout(timer)
        clearInterval(sweep)
        resolve()
      })
      server.closeIdleConnections()
    }).then(() => gateway.dispose())
  return { gateway, server, url: `http://${shownHost}:${address.port}`, close }
}
