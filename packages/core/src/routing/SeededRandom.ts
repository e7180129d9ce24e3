/**
 * A small seeded pseudo-random source for route planning: `make("seed")` returns a `() => number` in [0, 1) that
 * yields the same sequence for the same seed in every process. Tests use it to make plans reproducible; the planner
 * uses it to derive a session's weighted choice from the session key, so gateway processes agree without sharing
 * state. Not for cryptography.
 */

/** A uniform source of numbers in [0, 1). */
export type Random = () => number

/** cyrb128: four 32-bit hashes of a string, the seed of `sfc32`. */
export const hash = (value: string): readonly [number, number, number, number] => {
  let h1 = 1779033703
  let h2 = 3144134277
  let h3 = 1013904242
  let h4 = 2773480762
  for (let i = 0; i < value.length; i++) {
    const k = value.charCodeAt(i)
    h1 = h2 ^ Math.imul(h1 ^ k, 597399067)
    h2 = h3 ^ Math.imul(h2 ^ k, 2869860233)
    h3 = h4 ^ Math.imul(h3 ^ k, 951274213)
    h4 = h1 ^ Math.imul(h4 ^ k, 2716044179)
  }
  h1 = Math.imul(h3 ^ (h1 >>> 18), 597399067)
  h2 = Math.imul(h4 ^ (h2 >>> 22), 2869860233)
  h3 = Math.imul(h1 ^ (h3 >>> 17), 951274213)
  h4 = Math.imul(h2 ^ (h4 >>> 19), 2716044179)
  h1 ^= h2 ^ h3 ^ h4
  h2 ^= h1
  h3 ^= h1
  h4 ^= h1
  return [h1 >>> 0, h2 >>> 0, h3 >>> 0, h4 >>> 0]
}

/**
 * sfc32 seeded with the cyrb128 hash of `seed` (a number is used through its decimal string). The hash is taken on
 * the first draw, so a source that is never drawn from (a plan with a session, or without a stable endpoint) costs
 * next to nothing.
 */
export const make = (seed: string | number): Random => {
  let a = 0
  let b = 0
  let c = 0
  let d = 0
  const next = (): number => {
    a |= 0
    b |= 0
    c |= 0
    d |= 0
    const t = (((a + b) | 0) + d) | 0
    d = (d + 1) | 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) | 0
    c = (c << 21) | (c >>> 11)
    c = (c + t) | 0
    return (t >>> 0) / 4294967296
  }
  let seeded = false
  return () => {
    if (!seeded) {
      seeded = true
      ;[a, b, c, d] = hash(String(seed))
      // the first outputs of sfc32 are poorly mixed
      for (let i = 0; i < 12; i++) next()
    }
    return next()
  }
}

/** One uniform number in [0, 1) for a key: the first output of `make(key)`. */
export const uniform = (key: string): number => make(key)()
