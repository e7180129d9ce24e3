/**
 * Cost from an endpoint's pricing, computed exactly in decimal (prices are decimal strings per token),
 * so a sum of many small prices never drifts the way binary floating point does.
 */
import type { Pricing } from "../catalogue/Catalogue.js"

interface Decimal {
  readonly units: bigint
  readonly scale: number
}

const DECIMAL = /^(\d+)(?:\.(\d+))?$/

/** Parses a non-negative decimal string such as "0.000003"; anything else is a programming error upstream of here. */
export const parseDecimal = (value: string): Decimal => {
  const match = DECIMAL.exec(value.trim())
  if (match === null) throw new Error(`not a decimal: ${value}`)
  const fraction = match[2] ?? ""
  return { units: BigInt(match[1] + fraction), scale: fraction.length }
}

/** True when the string is a non-negative decimal number the cost arithmetic accepts. */
export const isDecimal = (value: string): boolean => DECIMAL.test(value.trim())

const align = (a: Decimal, scale: number): bigint => a.units * 10n ** BigInt(scale - a.scale)

const add = (a: Decimal, b: Decimal): Decimal => {
  const scale = Math.max(a.scale, b.scale)
  return { units: align(a, scale) + align(b, scale), scale }
}

const times = (a: Decimal, n: number): Decimal => ({
  units: a.units * BigInt(Math.max(0, Math.trunc(n))),
  scale: a.scale
})

/** Formats without exponent and without trailing zeros: "0.000123", "12", "0". */
export const formatDecimal = (d: Decimal): string => {
  if (d.scale === 0) return d.units.toString()
  const digits = d.units.toString().padStart(d.scale + 1, "0")
  const whole = digits.slice(0, digits.length - d.scale)
  const fraction = digits.slice(digits.length - d.scale).replace(/0+$/, "")
  return fraction.length === 0 ? whole : `${whole}.${fraction}`
}

/** Sums decimal strings exactly. */
export const sumDecimals = (values: Iterable<string>): string => {
  let total: Decimal = { units: 0n, scale: 0 }
  for (const v of values) total = add(total, parseDecimal(v))
  return formatDecimal(total)
}

/** Token counts as billed: `input` excludes cache reads and cache writes (Anthropic's convention). */
export interface BilledUsage {
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
  readonly images?: number
}

/** The USD cost of one answered request as an exact decimal string. */
export const cost = (pricing: Pricing, usage: BilledUsage): string => {
  const prompt = parseDecimal(pricing.prompt)
  let total = times(prompt, usage.input)
  total = add(total, times(parseDecimal(pricing.completion), usage.output))
  total = add(total, times(pricing.inputCacheRead ? parseDecimal(pricing.inputCacheRead) : prompt, usage.cacheRead))
  total = add(total, times(pricing.inputCacheWrite ? parseDecimal(pricing.inputCacheWrite) : prompt, usage.cacheWrite))
  total = add(total, times(parseDecimal(pricing.image), usage.images ?? 0))
  total = add(total, parseDecimal(pricing.request))
  return formatDecimal(total)
}
