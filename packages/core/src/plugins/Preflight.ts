/**
 * The plugins that act on a messages request's input before routing: moderation (a guardrail that can refuse it),
 * web search and web fetch (results added to the system prompt), and the context-compression engine check.
 */
import * as Effect from "effect/Effect"
import * as GatewayError from "../errors/GatewayError.js"
import type { MessagesPorts } from "../messages/MessagesPorts.js"
import { appendSystem, type JsonObject } from "../messages/Wire.js"
import type { PipelineStep } from "../routing/RoutePlanner.js"
import * as ContextCompression from "./ContextCompression.js"
import * as Moderation from "./Moderation.js"
import type { Plugins } from "./RequestPlugins.js"
import * as TaskClassifier from "./TaskClassifier.js"
import * as WebSearch from "./WebSearch.js"

/** True when a preflight plugin is enabled; only then is `preflight` run. */
export const needsPreflight = (plugins: Plugins): boolean =>
  plugins.moderation !== undefined || plugins.web !== undefined || plugins["web-fetch"] !== undefined ||
  plugins["context-compression"] !== undefined

/** How a body of an API takes text added to its system prompt (Anthropic's `system`, a chat system message, ...). */
export type AppendSystem = (body: JsonObject, text: string) => JsonObject

/**
 * Runs the enabled preflight plugins, in order; the body to route and forward, or the request's refusal. Search
 * results and fetched pages go into the system prompt as `append` puts them (a messages body's by default).
 */
export const preflight = (
  ports: Pick<MessagesPorts, "moderation" | "webSearch">,
  body: JsonObject,
  plugins: Plugins,
  steps: Array<PipelineStep>,
  append: AppendSystem = appendSystem
): Effect.Effect<JsonObject, GatewayError.GatewayError> => {
  const checked = Effect.suspend(() => {
    for (const id of ["web", "web-fetch"] as const) {
      if (plugins[id] !== undefined && ports.webSearch === undefined) return Effect.fail(WebSearch.notConfigured(id))
    }
    const engine = plugins["context-compression"]?.engine
    if (engine !== undefined && !ContextCompression.engines.includes(engine as never)) {
      return Effect.fail(
        new GatewayError.InvalidRequest({
          message: `context-compression: unknown engine '${engine}' (known: ${ContextCompression.engines.join(", ")})`,
          param: "plugins"
        })
      )
    }
    const search = ports.webSearch
    if (search === undefined) return Effect.succeed(body)
    const userText = TaskClassifier.latestUserText(body.messages)
    return Effect.flatMap(
      plugins.web === undefined ? Effect.succeed(body) : withSearchResults(search, body, userText, steps, append),
      (out) =>
        plugins["web-fetch"] === undefined
          ? Effect.succeed(out)
          : withFetchedPages(search, out, userText, steps, append)
    )
  })
  return plugins.moderation === undefined ? checked : Effect.zipRight(moderate(ports.moderation, body, steps), checked)
}

/** moderation: the guardrail step, or a 403 carrying the pipeline when the input is flagged. */
const moderate = (
  moderation: Moderation.ModerationService | undefined,
  body: JsonObject,
  steps: Array<PipelineStep>
): Effect.Effect<void, GatewayError.GatewayError> => {
  if (moderation === undefined) {
    return Effect.fail(
      new GatewayError.InvalidRequest({
        message: "the moderation plugin was requested but no moderation provider is configured",
        param: "plugins"
      })
    )
  }
  return moderation.check(Moderation.moderationInput(body)).pipe(
    Effect.mapError((e) => new GatewayError.Unavailable({ message: `moderation unavailable: ${e.message}` })),
    Effect.flatMap((result) => {
      steps.push(Moderation.guardrailStep(result))
      if (!result.flagged) return Effect.void
      return Effect.fail(
        new GatewayError.PermissionDenied({ message: Moderation.blocked(result).message, pipeline: steps })
      )
    })
  )
}

/**
 * web: search results for the latest user turn, added to the system prompt. A failed search adds nothing. Fusion's
 * analysts' web search tool runs the same way.
 */
export const withSearchResults = (
  search: WebSearch.WebSearchService,
  body: JsonObject,
  userText: string,
  steps: Array<PipelineStep>,
  append: AppendSystem
): Effect.Effect<JsonObject> => {
  const query = userText.slice(0, 400)
  return search.search(query, { maxResults: 5 }).pipe(
    Effect.catchAll((e) => {
      steps.push({ type: "plugin", name: "web", summary: `search failed: ${e.message}` })
      return Effect.succeed([] as ReadonlyArray<WebSearch.SearchResult>)
    }),
    Effect.map((results) => {
      if (results.length === 0) return body
      steps.push({ type: "plugin", name: "web", summary: `${results.length} search result(s) added to the prompt` })
      const listed = results.map((r, i) => `[${i + 1}] ${r.title} (${r.url})\n${r.snippet}`).join("\n\n")
      return append(body, `Web search results for "${query}":\n${listed}`)
    })
  )
}

/**
 * web-fetch: the pages at the first `maxPages` (three) URLs of the latest user turn, added to the system prompt.
 * Fusion's analysts' web fetch tool runs the same way.
 */
export const withFetchedPages = (
  search: WebSearch.WebSearchService,
  body: JsonObject,
  userText: string,
  steps: Array<PipelineStep>,
  append: AppendSystem,
  maxPages = 3
): Effect.Effect<JsonObject> => {
  const urls = [...new Set(userText.match(/https?:\/\/[^\s<>"')\]]+/g) ?? [])].slice(0, maxPages)
  const fetched = Effect.forEach(urls, (url) =>
    search.fetch(url).pipe(
      Effect.map((page) => [page]),
      Effect.catchAll((e) => {
        steps.push({ type: "plugin", name: "web-fetch", summary: `fetching ${url} failed: ${e.message}` })
        return Effect.succeed([] as Array<WebSearch.FetchedPage>)
      })
    ), { concurrency: 3 })
  return Effect.map(fetched, (pages) => {
    let out = body
    for (const page of pages.flat()) {
      steps.push({ type: "plugin", name: "web-fetch", summary: `fetched ${page.url} into the prompt` })
      out = append(out, `Content of ${page.url} (${page.title}):\n${page.text.slice(0, 100_000)}`)
    }
    return out
  })
}
