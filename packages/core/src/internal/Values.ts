/** Small helpers the request schemas share for reading unknown JSON values and naming them in errors. */

/** A JSON object (not null, not an array). */
export const isObject = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** A short, human-readable rendering of a value for error messages (never the whole value). */
export const show = (u: unknown): string => {
  switch (typeof u) {
    case "string":
      return u.length > 64 ? `${JSON.stringify(u.slice(0, 64))}...` : JSON.stringify(u)
    case "number":
    case "boolean":
      return String(u)
    case "object":
      return u === null ? "null" : Array.isArray(u) ? "an array" : "an object"
  }
  return typeof u
}
