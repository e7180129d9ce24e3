/**
 * Who may see an intern. The API key selects the caller, its workspace and the interns it sees; there is no default
 * workspace. A key outside the interns programme gets 404 on every intern route, as if they did not exist; so does a
 * key of another workspace for an intern it cannot see. Requests on a regional hostname are refused (403).
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Principal } from "../auth/Keys.js"
import { NotFound, PermissionDenied } from "../errors/GatewayError.js"
import type { Intern } from "./Intern.js"
import type { InternStoreService } from "./InternStore.js"

/** A request to an intern route: who sent it, and to which host. */
export interface InternCaller {
  readonly principal: Principal
  readonly requestId: string
  /** The `Host` header, if any. */
  readonly host?: string | undefined
}

/** The 404 of an intern the caller cannot see: the same whether it exists elsewhere or not at all. */
export const notFound = (id: string): NotFound => new NotFound({ message: `Intern '${id}' not found` })

const outsideProgramme = new NotFound({ message: "Not found" })

/** A host name without its port or trailing dot, lower-cased: `EU.example.com.:443` → `eu.example.com`. */
export const hostnameOf = (host: string): string => {
  const trimmed = host.trim().toLowerCase()
  if (trimmed.startsWith("[")) return trimmed.slice(0, trimmed.indexOf("]") + 1)
  const colon = trimmed.indexOf(":")
  const name = colon === -1 ? trimmed : trimmed.slice(0, colon)
  // A fully qualified name's trailing dot names the same host: `eu.example.com.` is `eu.example.com`.
  let end = name.length
  while (end > 0 && name.charCodeAt(end - 1) === 0x2e) end--
  return name.slice(0, end)
}

/** Checks a caller against the programme and the regional hostnames; gives the workspace whose interns it sees. */
export const admit = (
  caller: InternCaller,
  regional: ReadonlySet<string>
): Effect.Effect<string, NotFound | PermissionDenied> => {
  if (!caller.principal.interns) return Effect.fail(outsideProgramme)
  if (caller.host !== undefined && regional.has(hostnameOf(caller.host))) {
    return Effect.fail(
      new PermissionDenied({
        message: `Interns are not served on the regional hostname ${hostnameOf(caller.host)}; use the global hostname`,
        reason: "regional_hostname"
      })
    )
  }
  return Effect.succeed(caller.principal.workspace)
}

/** An intern the caller sees, or 404. */
export const visible = (
  store: InternStoreService,
  regional: ReadonlySet<string>,
  caller: InternCaller,
  id: string
): Effect.Effect<Intern, NotFound | PermissionDenied> =>
  Effect.flatMap(
    admit(caller, regional),
    (workspace) =>
      Effect.flatMap(
        store.get(workspace, id),
        Option.match({ onNone: () => Effect.fail(notFound(id)), onSome: Effect.succeed })
      )
  )
