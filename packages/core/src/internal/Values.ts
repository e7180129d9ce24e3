/** How the request schemas name an unknown JSON value in an error message. */

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
