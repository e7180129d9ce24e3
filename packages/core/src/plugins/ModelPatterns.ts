/**
 * Model id patterns of the router plugins' `allowed_models` and `excluded_models`.
 *
 * A pattern is a model id in which `*` stands for any run of characters, `/` included (`vendor/*`, `*`,
 * `*-mini`, `vendor/*-mini`); every other character is literal. Matching ignores ASCII case. A list of patterns
 * is compiled once per request into one predicate: exact ids go to a set, the rest are matched segment by segment
 * without regular expressions, in time linear in the id for each pattern.
 */

/** A compiled list of patterns: true when any pattern of the list matches the id. */
export type Matcher = (id: string) => boolean

const none: Matcher = () => false
const all: Matcher = () => true

/** True when `id` matches the glob whose `*`-separated literal parts are `parts` (at least two). */
const globMatch = (parts: ReadonlyArray<string>, id: string): boolean => {
  const first = parts[0]
  const last = parts[parts.length - 1]
  if (id.length < first.length + last.length || !id.startsWith(first) || !id.endsWith(last)) return false
  let at = first.length
  const end = id.length - last.length
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i]
    if (part === "") continue
    const found = id.indexOf(part, at)
    if (found < 0 || found + part.length > end) return false
    at = found + part.length
  }
  return true
}

/** Compiles a list of patterns into one predicate; an empty list matches nothing. */
export const compile = (patterns: ReadonlyArray<string>): Matcher => {
  if (patterns.length === 0) return none
  const exact = new Set<string>()
  const globs: Array<ReadonlyArray<string>> = []
  for (const pattern of patterns) {
    const lower = pattern.toLowerCase()
    if (!lower.includes("*")) exact.add(lower)
    else if (/^\*+$/.test(lower)) return all
    else globs.push(lower.split("*"))
  }
  if (globs.length === 0) return (id) => exact.has(id.toLowerCase())
  return (id) => {
    const lower = id.toLowerCase()
    if (exact.has(lower)) return true
    for (const parts of globs) if (globMatch(parts, lower)) return true
    return false
  }
}

/** True when `id` matches `pattern`. */
export const matches = (pattern: string, id: string): boolean => compile([pattern])(id)

/** The outcome of filtering ids by `allowed_models` then `excluded_models`. */
export interface Filtered {
  /** Ids that are allowed and not excluded, in input order. */
  readonly kept: ReadonlyArray<string>
  /** Ids no pattern of `allowed_models` matched. */
  readonly notAllowed: ReadonlyArray<string>
  /** Allowed ids that a pattern of `excluded_models` matched. */
  readonly excluded: ReadonlyArray<string>
}

/**
 * Splits ids by `allowed` then `excluded`: an id is kept when it is allowed (`allowed` absent or empty allows
 * every id) and matches no pattern of `excluded`. Exclusion always wins over allowance.
 */
export const partitionModels = (
  ids: Iterable<string>,
  allowed?: ReadonlyArray<string> | undefined,
  excluded?: ReadonlyArray<string> | undefined
): Filtered => {
  const isAllowed = allowed === undefined || allowed.length === 0 ? all : compile(allowed)
  const isExcluded = excluded === undefined ? none : compile(excluded)
  const kept: Array<string> = []
  const notAllowed: Array<string> = []
  const excludedIds: Array<string> = []
  for (const id of ids) {
    if (!isAllowed(id)) notAllowed.push(id)
    else if (isExcluded(id)) excludedIds.push(id)
    else kept.push(id)
  }
  return { kept, notAllowed, excluded: excludedIds }
}

/** The ids that are allowed and not excluded, in input order (see `partitionModels`). */
export const filterModels = (
  ids: Iterable<string>,
  allowed?: ReadonlyArray<string> | undefined,
  excluded?: ReadonlyArray<string> | undefined
): ReadonlyArray<string> => partitionModels(ids, allowed, excluded).kept
