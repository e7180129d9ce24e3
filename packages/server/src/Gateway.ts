/**
 * The composition root: wires the core use cases to the adapters a configuration names, builds the runtime once, and
 * exposes the gateway as a node request listener, a web fetch handler and an `@effect/platform` HttpApp. Effect users
 * take `layer` or `serve`; embedders who are not on Effect call `makeGateway` or `startServer`.
 */
import {
  BatchService,
  BatchWorker,
  Catalogue,
  InternChat,
  InternRuntime,
  InternService,
  Keys,
  MessagesService,
  Moderation,
  OpenAiService,
  Quotas,
  SpeechService,
  type Stores,
  Upstream,
  WebSearch
} from "@model-gateway/core"
import type { GatewayHttp } from "@model-gateway/http-adapter"
import { ApiKeys, FetchBinding, GatewayHttp as Http, HttpAppBinding, NodeBinding } from "@model-gateway/http-adapter"
import {
  JsonSchemaHealer,
  LocalTokenCounter,
  OpenAiModeration,
  PdfDocumentParser,
  UpstreamRouter
} from "@model-gateway/provider-adapters"
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as Scope from "effect/Scope"
import type { Server } from "node:http"
import type { AddressInfo } from "node:net"
import type { GatewayConfig } from "./Config.js"
import { catalogueModels, limitsOf, providerConfigs } from "./Config.js"
import * as LocalInternRuntime from "./interns/LocalInternRuntime.js"
import * as Logging from "./Logging.js"
import * as Reload from "./Reload.js"
import * as RequestLog from "./RequestLog.js"
import { createTrackedServer, shutDown } from "./Shutdown.js"
import { ListenError, type StorageError } from "./StartupErrors.js"
import { storesFor } from "./Storage.js"

export { storageLayer } from "./Storage.js"

export interface GatewayOptions {
  /** Storage URL: `memory:`, `sqlite:PATH`, `sqlite::memory:`, `postgres://...`. The configuration's by default. */
  readonly storage?: string | undefined
  /** Replace provider adapters by name (tests, custom adapters). */
  readonly upstreams?: Readonly<Record<string, Upstream.UpstreamService>> | undefined
  /** Strip this prefix before routing, when mounted under a path in another server. */
  readonly mountPath?: string | undefined
  /** A search provider for the `web` / `web-fetch` plugins (none by default). */
  readonly webSearch?: WebSearch.WebSearchService | undefined
  /** Replaces the runtime's clock (tests that move time forward). */
  readonly clock?: Clock.Clock | undefined
  /** How the gateway logs (logfmt lines on standard output at Info by default); see `Logging.make`. */
  readonly logging?: Logging.Logging | undefined
  /** One log line per request at its completion (default true). */
  readonly requestLog?: boolean | undefined
  /** Interns: replace their runtime (daemons as local processes by default), or the daemon program it starts. */
  readonly interns?: {
    readonly runtime?: InternRuntime.InternRuntimeService | undefined
    readonly daemonEntry?: string | undefined
  } | undefined
}

/** The moderation adapter the configuration names, if any. */
const moderationLayer = (config: GatewayConfig): Layer.Layer<never> | Layer.Layer<Moderation.Moderation> => {
  const m = config.moderation
  if (m === undefined) return Layer.empty
  return m.kind === "blocklist"
    ? Layer.succeed(Moderation.Moderation, Moderation.blocklist(m.terms))
    : OpenAiModeration.layer({ baseUrl: m.baseUrl, apiKey: m.apiKey, model: m.model })
}

/** The workspaces' configured limits. */
const workspaceLimits = (config: GatewayConfig) => {
  const workspaces: Record<string, NonNullable<ReturnType<typeof limitsOf>>> = {}
  for (const [name, workspace] of Object.entries(config.workspaces)) {
    const limits = limitsOf(workspace.limits)
    if (limits !== undefined) workspaces[name] = limits
  }
  return workspaces
}

export type GatewayServices =
  | BatchService.Batches
  | Quotas.Quotas
  | MessagesService.MessagesService
  | OpenAiService.OpenAiService
  | SpeechService.SpeechService
  | InternService.Interns
  | InternChat.InternChat
  | Catalogue.Catalogue
  | Upstream.Upstream
  | Stores.Stores

/** The interns use cases and their runtime, over the messages use case and the stores. */
const internsLayer = (config: GatewayConfig, options: GatewayOptions) => {
  const interns = config.interns
  const regionalHostnames = interns?.regionalHostnames
  const runtime = options.interns?.runtime !== undefined
    ? Layer.succeed(InternRuntime.InternRuntime, options.interns.runtime)
    : LocalInternRuntime.layerConfig({
      entry: options.interns?.daemonEntry,
      publicOrigin: interns?.publicOrigin,
      tokenTtlSeconds: interns?.tokenTtlSeconds
    })
  return InternService.layer({ regionalHostnames, defaultModel: interns?.defaultModel }).pipe(
    Layer.provideMerge(runtime),
    Layer.provideMerge(InternChat.layer({ regionalHostnames, maxTokens: interns?.maxTokens }))
  )
}

/** The batches use case and, unless the configuration turns it off, this process's batch worker. */
const batchesLayer = (config: GatewayConfig) => {
  const b = config.batches
  const routerSlug = config.autoRouter.slug
  const service = BatchService.layer({
    maxRequests: b.maxRequests,
    maxBodyBytes: b.maxBodyBytes,
    windowMs: b.completionWindowSeconds * 1000,
    routerSlug
  })
  if (!b.worker) return service
  return Layer.merge(
    service,
    BatchWorker.layer({
      routerSlug,
      perBatch: b.perBatchConcurrency,
      perProcess: b.perProcessConcurrency,
      leaseMs: b.leaseMs,
      pollMs: b.pollMs,
      maxRetries: b.maxRetries,
      retryBaseMs: b.retryBaseMs,
      priceFactor: b.priceFactor
    })
  )
}

/**
 * The whole gateway as one Layer: the messages, OpenAI, speech, interns and batches use cases (and the batch worker)
 * over catalogue, upstreams and storage.
 */
export const layer = (
  config: GatewayConfig,
  options: GatewayOptions = {}
): Layer.Layer<GatewayServices, StorageError> =>
  layerWith(config, options, Catalogue.fromSnapshot(Catalogue.makeSnapshot(catalogueModels(config))), () => {})

/**
 * `layer`, with the catalogue given (a replaceable one, for `Gateway.reload`), and the upstream router handed to
 * `withRouter` once it is built (for the same).
 */
const layerWith = (
  config: GatewayConfig,
  options: GatewayOptions,
  catalogue: Catalogue.CatalogueService,
  withRouter: (router: UpstreamRouter.Replaceable) => void
): Layer.Layer<GatewayServices, StorageError> => {
  const logging = options.logging ?? Logging.make("logfmt")
  const stores = storesFor(config, options.storage ?? config.storage)
  const router = Effect.map(
    UpstreamRouter.makeReplaceable({ ...providerConfigs(config), ...options.upstreams }),
    (r) => {
      withRouter(r)
      return r.upstream
    }
  )
  const ports = Layer.mergeAll(
    Layer.succeed(Catalogue.Catalogue, catalogue),
    Layer.scoped(Upstream.Upstream, router),
    options.requestLog === false ? stores : Layer.merge(stores, Layer.provide(RequestLog.layer(logging), stores)),
    Layer.provide(Quotas.layer({ workspaces: workspaceLimits(config) }), stores)
  )
  const plugins = Layer.mergeAll(
    LocalTokenCounter.layer,
    JsonSchemaHealer.layer(),
    PdfDocumentParser.layer(),
    moderationLayer(config),
    options.webSearch === undefined ? Layer.empty : Layer.succeed(WebSearch.WebSearch, options.webSearch)
  )
  const useCaseOptions = { routerSlug: config.autoRouter.slug, fusion: config.fusion }
  const useCases = Layer.merge(MessagesService.layer(useCaseOptions), OpenAiService.layer(useCaseOptions))
  const gateway = Layer.merge(internsLayer(config, options), batchesLayer(config)).pipe(
    Layer.provideMerge(Layer.provide(useCases, plugins)),
    Layer.merge(SpeechService.layer),
    Layer.provideMerge(ports),
    // Effect's built-in fiber metrics (started, active, lifetimes) cost every request's fiber a few µs, and nothing
    // here reads them.
    Layer.merge(RuntimeFlags.disableRuntimeMetrics),
    Layer.merge(Logging.layer(logging))
  )
  // Provided, not merged: the fibers the layer starts while it is built (the batch worker) get the clock too.
  return options.clock === undefined ? gateway : Layer.provide(gateway, Layer.setClock(options.clock))
}

/**
 * Makes the stored configuration keys exactly the configuration's: new ones added, changed ones rewritten, removed
 * ones revoked. Keys made with `model-gateway keys create` are left alone.
 */
export const syncConfigKeys = (config: GatewayConfig) =>
  Effect.flatMap(Keys.Keys, (keys) =>
    keys.sync(
      "config",
      config.keys.map((k) => ({
        digest: ApiKeys.digest(k.key),
        workspace: k.workspace,
        management: k.management,
        interns: k.interns,
        label: k.label,
        limits: limitsOf(k.limits)
      }))
    ))

export interface Gateway {
  readonly runtime: ManagedRuntime.ManagedRuntime<GatewayServices, StorageError>
  readonly handler: GatewayHttp.Handler
  /** A `node:http` request listener. */
  readonly listener: ReturnType<typeof NodeBinding.makeListener>
  /** A web-standard fetch handler. */
  readonly fetch: (request: Request) => Promise<Response>
  /** The gateway as an `@effect/platform` HttpApp (provide the runtime's services when serving it). */
  readonly httpApp: ReturnType<typeof HttpAppBinding.make>
  /** Writes pending usage records and closes storage and the upstream connection pools. */
  readonly dispose: () => Promise<void>
  /**
   * Takes a new configuration's models and keys while serving (see `Reload`): requests under way finish with the
   * catalogue they started with. Rejects with `ReloadRefused`, taking nothing, when the configuration changes anything
   * else (which needs a restart).
   */
  readonly reload: (config: GatewayConfig) => Promise<Reload.Reloaded>
}

const bindings = (
  config: GatewayConfig,
  options: GatewayOptions,
  runtime: ManagedRuntime.ManagedRuntime<GatewayServices, StorageError>,
  catalogue: Catalogue.Replaceable,
  router: UpstreamRouter.Replaceable
): Gateway => {
  const reload = Reload.make(config, {
    catalogue,
    syncKeys: (next) =>
      Effect.orDie(Effect.flatMap(runtime.runtimeEffect, (rt) => Effect.provide(syncConfigKeys(next), rt))),
    rebuildProviders: (next, names) => {
      const configs = providerConfigs(next)
      // Adapters given ready-made (`options.upstreams`: test doubles, custom adapters) stay as they are.
      const rebuilt = names.filter((name) => options.upstreams?.[name] === undefined)
      return Effect.as(router.replace(Object.fromEntries(rebuilt.map((name) => [name, configs[name]!]))), rebuilt)
    }
  })
  const handler = Http.makeHandler({ basePath: config.server.basePath, cors: config.server.cors })
  const bindingOptions = {
    maxBodyBytes: config.server.maxBodyBytes,
    bodyIdleMs: config.server.bodyIdleTimeoutMs,
    mountPath: options.mountPath
  }
  return {
    runtime,
    handler,
    listener: NodeBinding.makeListener(runtime, handler, bindingOptions),
    fetch: FetchBinding.makeFetchHandler(runtime, handler, bindingOptions),
    httpApp: HttpAppBinding.make(handler, bindingOptions),
    dispose: () => runtime.dispose(),
    // The refusal itself, not Effect's wrapper of a failure, for callers that are not on Effect.
    reload: (next) =>
      Effect.runPromise(Effect.either(reload(next))).then((result) =>
        Either.isLeft(result) ? Promise.reject(result.left) : result.right
      )
  }
}

/**
 * The gateway for as long as the scope lasts: its runtime built (storage opened and migrated, pools made),
 * configuration keys synced. Closing the scope writes pending usage records and closes storage and pools.
 */
export const acquire = (
  config: GatewayConfig,
  options: GatewayOptions = {}
): Effect.Effect<Gateway, StorageError, Scope.Scope> =>
  Effect.suspend(() => {
    const catalogue = Catalogue.replaceable(Catalogue.makeSnapshot(catalogueModels(config)))
    let router: UpstreamRouter.Replaceable | undefined
    return Effect.acquireRelease(
      Effect.suspend(() => {
        const runtime = ManagedRuntime.make(layerWith(config, options, catalogue.catalogue, (r) => (router = r)))
        return runtime.runtimeEffect.pipe(
          Effect.flatMap((rt) => Effect.provide(syncConfigKeys(config), rt)),
          Effect.as(runtime),
          Effect.onError(() => runtime.disposeEffect)
        )
      }),
      (runtime) => runtime.disposeEffect
    ).pipe(Effect.map((runtime) => bindings(config, options, runtime, catalogue, router!)))
  })

/** Builds a gateway from a configuration (a Promise, for hosts that are not on Effect). Call `dispose` when done. */
export const makeGateway = async (config: GatewayConfig, options: GatewayOptions = {}): Promise<Gateway> => {
  const scope = Effect.runSync(Scope.make())
  const gateway = await Effect.runPromise(Scope.extend(acquire(config, options), scope))
  return { ...gateway, dispose: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

/** A gateway serving on its own `node:http` server. */
export interface Serving {
  readonly gateway: Gateway
  readonly server: Server
  /** `http://host:port` */
  readonly url: string
}

export interface RunningServer extends Serving {
  /**
   * Graceful: stops accepting, lets in-flight requests and streams finish, and the batch requests under way (up to
   * `graceMs`), then disposes.
   */
  readonly close: (graceMs?: number) => Promise<void>
}

export interface ServeOptions extends GatewayOptions {
  readonly host?: string | undefined
  /** 0 picks a free port. */
  readonly port?: number | undefined
  /** How long a graceful shutdown waits for in-flight requests, streams and batch requests (default 30 s). */
  readonly graceMs?: number | undefined
}

/**
 * Stops the gateway's batch worker gracefully (see `BatchWorker.drain`): it claims nothing more, and the requests it
 * has sent upstream finish and are recorded, for up to `graceMs`. Nothing to do in a process that runs no worker.
 */
const drainBatches = (gateway: Gateway, graceMs: number): Effect.Effect<void> =>
  Effect.flatMap(Effect.orDie(gateway.runtime.runtimeEffect), (runtime) =>
    Effect.provide(
      Effect.flatMap(
        Effect.serviceOption(BatchWorker.BatchWorker),
        Option.match({ onNone: () => Effect.void, onSome: (worker) => worker.drain(graceMs) })
      ),
      runtime
    ))

/**
 * The graceful stop of a served gateway, in one grace period: the server stops accepting and its in-flight requests
 * and streams finish, while the batch worker stops claiming and its requests under way finish (a batch request is
 * paid for as a live one is: cut, it would run, and be paid, again).
 */
const stopServing = (serving: Pick<Serving, "gateway" | "server">, graceMs: number): Effect.Effect<void> =>
  Effect.all([Effect.promise(() => shutDown(serving.server, graceMs)), drainBatches(serving.gateway, graceMs)], {
    concurrency: "unbounded",
    discard: true
  })

const listen = (server: Server, port: number, host: string) =>
  Effect.async<void, ListenError>((resume) => {
    const failed = (error: NodeJS.ErrnoException) => resume(Effect.fail(new ListenError({ host, port, cause: error })))
    server.once("error", failed)
    server.listen(port, host, () => {
      server.off("error", failed)
      resume(Effect.void)
    })
  })

/**
 * The gateway on its own `node:http` server for as long as the scope lasts. Closing the scope shuts down gracefully:
 * no new connections, in-flight requests and streams finish (up to `graceMs`), connections with no request in flight
 * are closed (at once, or within a second of their opening: see `Shutdown`); in the same time the batch worker claims
 * nothing more and its requests under way finish; then the gateway is released.
 */
export const serve = (
  config: GatewayConfig,
  options: ServeOptions = {}
): Effect.Effect<Serving, StorageError | ListenError, Scope.Scope> =>
  Effect.gen(function*() {
    const gateway = yield* acquire(config, options)
    const server = createTrackedServer({
      // Longer than the usual load balancer's idle time-out (60 s), so that it, not the gateway, closes idle
      // connections (a connection closed by the gateway while the balancer sends on it is a failed request).
      keepAliveTimeout: 65_000,
      headersTimeout: config.server.headersTimeoutMs,
      // How often node looks for connections past their headers time-out (default 30 s: far too coarse for 15 s).
      connectionsCheckingInterval: Math.min(1_000, config.server.headersTimeoutMs)
    }, gateway.listener)
    const host = options.host ?? config.server.host
    const port = options.port ?? config.server.port
    const graceMs = options.graceMs ?? 30_000
    yield* Effect.acquireRelease(listen(server, port, host), () => stopServing({ gateway, server }, graceMs))
    const address = server.address() as AddressInfo
    const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address
    return { gateway, server, url: `http://${shownHost}:${address.port}` }
  })

/** Starts the gateway on its own `node:http` server (a Promise, for hosts that are not on Effect). */
export const startServer = async (config: GatewayConfig, options: ServeOptions = {}): Promise<RunningServer> => {
  const scope = Effect.runSync(Scope.make())
  const serving = await Effect.runPromise(Scope.extend(serve(config, options), scope)).catch(async (error) => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    throw error
  })
  let closing: Promise<void> | undefined
  const close = (graceMs = options.graceMs ?? 30_000) =>
    closing ??= Effect.runPromise(stopServing(serving, graceMs)).then(() =>
      Effect.runPromise(Scope.close(scope, Exit.void))
    )
  return { ...serving, close }
}
