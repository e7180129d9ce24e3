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

/** A decimal string multiplied by another, exactly ("0.000123" times "0.5" is "0.0000615"). */
export const multiplyDecimals = (value: string, factor: string): string => {
  const a = parseDecimal(value)
  const b = parseDecimal(factor)
  return formatDecimal({ units: a.units * b.units, scale: a.scale + b.scale })
}

/** Token counts as billed: `input` excludes cache reads and cache writes (Anthropic's convention). */
export interface BilledUsage {
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
  readonly images?: number
}

/** An endpoint's prices parsed and scaled to one common number of decimals, so a cost is a few BigInt products. */
interface ParsedPricing {
  readonly scale: number
  readonly prompt: bigint
  readonly completion: bigint
  readonly cacheRead: bigint
  readonly cacheWrite: bigint
  readonly image: bigint
  readonly request: bigint
}

const parsePricing = (pricing: Pricing): ParsedPricing => {
  const prompt = parseDecimal(pricing.prompt)
  const completion = parseDecimal(pricing.completion)
  const cacheRead = pricing.inputCacheRead ? parseDecimal(pricing.inputCacheRead) : prompt
  const cacheWrite = pricing.inputCacheWrite ? parseDecimal(pricing.inputCacheWrite) : prompt
  const image = parseDecimal(pricing.image)
  const request = parseDecimal(pricing.request)
  const scale = Math.max(prompt.scale, completion.scale, cacheRead.scale, cacheWrite.scale, image.scale, request.scale)
  return {
    scale,
    prompt: align(prompt, scale),
    completion: align(completion, scale),
    cacheRead: align(cacheRead, scale),
    cacheWrite: align(cacheWrite, scale),
    image: align(image, scale),
    request: align(request, scale)
  }
}

// Catalogue snapshots are immutable: each endpoint's prices are parsed once, not on every request.
const parsed = new WeakMap<Pricing, ParsedPricing>()

const count = (n: number): bigint => BigInt(Math.max(0, Math.trunc(n)))

/** The USD cost of one answered request as an exact decimal string. */
export const cost = (pricing: Pricing, usage: BilledUsage): string => {
  let p = parsed.get(pricing)
  if (p === undefined) {
    p = parsePricing(pricing)
    parsed.set(pricing, p)
  }
  const units = p.prompt * count(usage.input) +
    p.completion * count(usage.output) +
    p.cacheRead * count(usage.cacheRead) +
    p.cacheWrite * count(usage.cacheWrite) +
    p.image * count(usage.images ?? 0) +
    p.request
  return formatDecimal({ units, scale: p.scale })
}
