/**
 * The `web` and `web-fetch` plugins' port: web search and page fetching run by the gateway. There is
 * no default adapter: a deployment wires one in (a search API, a fetcher), and a request that asks for
 * these plugins where none is configured gets a clear 400 (`notConfigured`).
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Effect from "effect/Effect"
import * as GatewayError from "../errors/GatewayError.js"

/** Narrows a search; every field is optional and an adapter ignores what its provider cannot do. */
export interface SearchOptions {
  /** At most this many results. */
  readonly maxResults?: number | undefined
  /** Only results from these domains (and their subdomains). */
  readonly allowedDomains?: ReadonlyArray<string> | undefined
  /** No results from these domains. */
  readonly blockedDomains?: ReadonlyArray<string> | undefined
  /** Where the user is, for localised results (the web search tool's `user_location`). */
  readonly userLocation?: {
    readonly city?: string | undefined
    readonly region?: string | undefined
    readonly country?: string | undefined
    readonly timezone?: string | undefined
  } | undefined
}

/** One search hit. */
export interface SearchResult {
  readonly url: string
  readonly title: string
  /** A short extract of the page, as the search provider gives it. */
  readonly snippet: string
  /** How old the page is, as the provider reports it (e.g. "2 days ago"), when it does. */
  readonly pageAge?: string | undefined
}

/** Limits of one fetch. */
export interface FetchOptions {
  /** Truncate the extracted text to about this many characters. */
  readonly maxChars?: number | undefined
  readonly allowedDomains?: ReadonlyArray<string> | undefined
  readonly blockedDomains?: ReadonlyArray<string> | undefined
}

/** A fetched page reduced to text. `url` is the final URL, after redirects. */
export interface FetchedPage {
  readonly url: string
  readonly title: string
  readonly text: string
}

/**
 * Why a search or fetch failed: the error codes of the Anthropic web search and web fetch tool results,
 * so that a failure can be reported in-band (`web_search_tool_result_error`, `web_fetch_tool_error`).
 */
export type WebErrorCode =
  | "invalid_tool_input"
  | "unavailable"
  | "max_uses_exceeded"
  | "too_many_requests"
  | "query_too_long"
  | "url_too_long"
  | "url_not_allowed"
  | "url_not_accessible"
  | "unsupported_content_type"

export class WebSearchFailed extends Data.TaggedError("WebSearchFailed")<{
  readonly code: WebErrorCode
  readonly message: string
}> {}

export interface WebSearchService {
  /** Searches the web. */
  readonly search: (
    query: string,
    options: SearchOptions
  ) => Effect.Effect<ReadonlyArray<SearchResult>, WebSearchFailed>
  /** Fetches one page and extracts its text. */
  readonly fetch: (url: string, options?: FetchOptions) => Effect.Effect<FetchedPage, WebSearchFailed>
}

/** Port: web search and fetch. No default adapter. */
export class WebSearch extends Context.Tag("@model-gateway/core/WebSearch")<WebSearch, WebSearchService>() {}

/** The 400 for a request that enables `web` or `web-fetch` on a gateway with no search provider configured. */
export const notConfigured = (pluginId: "web" | "web-fetch"): GatewayError.InvalidRequest =>
  new GatewayError.InvalidRequest({
    message: `the '${pluginId}' plugin needs a web ${
      pluginId === "web" ? "search" : "fetch"
    } provider, and no search provider is configured on this gateway; remove the plugin or set it to enabled: false`,
    param: "plugins"
  })
