/**
 * What a batch needs of the catalogue: its model, and an endpoint of it from a provider the batch allows. Checked when
 * the batch is submitted (a 404 or a 400) and again when a worker starts it (the catalogue of the process that runs
 * it may differ: the batch then fails with the reason).
 */
import type { CatalogueSnapshot } from "../catalogue/Catalogue.js"
import type { BatchProvider } from "./Batch.js"

export type Problem =
  | { readonly _tag: "UnknownModel"; readonly message: string }
  | { readonly _tag: "NoProvider"; readonly message: string }

/**
 * Why a batch of `model` restricted to `provider` cannot run on this catalogue; undefined when it can. The auto-router's
 * slug (`routerSlug`) is no catalogue model: each request's model is chosen when it runs, as on the live routes.
 */
export const check = (
  snapshot: CatalogueSnapshot,
  model: string,
  provider: BatchProvider | null,
  routerSlug: string | undefined
): Problem | undefined => {
  if (model === routerSlug) return undefined
  const found = snapshot.models.get(model)
  if (found === undefined) {
    return { _tag: "UnknownModel", message: `model: '${model}' is not a model of this gateway` }
  }
  const only = provider?.only
  if (only === undefined || only.length === 0) return undefined
  const allowed = new Set(only.map((slug) => slug.toLowerCase()))
  if (found.endpoints.some((endpoint) => allowed.has(endpoint.provider.toLowerCase()))) return undefined
  const serving = [...new Set(found.endpoints.map((endpoint) => endpoint.provider))]
  return {
    _tag: "NoProvider",
    message: `provider.only: no endpoint of '${model}' is served by ${only.join(", ")} (its providers: ${
      serving.join(", ") || "none"
    })`
  }
}
