/**
 * The plugins a request enabled, by id: what the use cases' plugin steps look up.
 */
import type { Plugin } from "../routing/GatewayFields.js"

/** The enabled plugins of a request, each under its id. */
export type Plugins = Partial<{ [K in Plugin["id"]]: Extract<Plugin, { id: K }> }>

/** The enabled plugins of a request by id, with each one's index in `plugins` for error paths. */
export const enabledPlugins = (
  request: { readonly plugins?: ReadonlyArray<Plugin> | undefined }
): { readonly plugins: Plugins; readonly index: Record<string, number> } => {
  const plugins: Record<string, unknown> = {}
  const index: Record<string, number> = {}
  request.plugins?.forEach((plugin, i) => {
    if ((plugin as { enabled?: boolean }).enabled === false) return
    plugins[plugin.id] = plugin
    index[plugin.id] = i
  })
  return { plugins: plugins as Plugins, index }
}
