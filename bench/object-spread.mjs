// A V8 cliff on the gateway's hot path (Node 20 / V8 11.3): an object made by spread (`{ ...o }`) that
// then gets keys `o` did not have (`{ ...o, extra: 1 }`, or assignments afterwards) costs about 1 µs
// per added key, because each such object gets fresh hidden classes instead of cached transitions.
// Overriding keys `o` already has is cheap, and so are Object.assign and "literal first, then spread".
//
//   node bench/object-spread.mjs
//
// The `completeUsage` case is the shape of MessagesService's `completeUsage` (9 new keys on the
// upstream's usage object); `assign` builds the same object, same key order, with Object.assign.
// The `planner requirements` cases are the `requirements` MessagesService.execute gives RoutePlanner.plan
// (`{ ...needs, documents, parameters, estimatedPromptTokens }`: 2 new keys), and the `message_delta` cases the
// usage of a stream's `message_delta` frame (`{ ...delta, output_tokens, cost }`: 1 new key).
const N = 300_000
const text = JSON.stringify({ input_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 24 })
const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : 0)
const fields = (u) => ({
  input_tokens: num(u.input_tokens),
  output_tokens: num(u.output_tokens),
  cache_creation_input_tokens: num(u.cache_creation_input_tokens),
  cache_read_input_tokens: num(u.cache_read_input_tokens),
  cache_creation: u.cache_creation ?? null,
  inference_geo: u.inference_geo ?? null,
  output_tokens_details: u.output_tokens_details ?? null,
  server_tool_use: u.server_tool_use ?? null,
  service_tier: u.service_tier ?? null,
  speed: u.speed ?? null,
  cost: 0.000396,
  cost_details: u.cost_details ?? null,
  is_byok: false
})

// MessagesService's `requirements(request, body)` result, and the parameters the planner is given beside it.
const requirementsOf = (u) => ({ tools: false, images: false, documents: false, maxTokens: u.output_tokens })
const PARAMETERS = ["max_tokens"]

const cases = {
  "JSON.parse only (baseline)": (u) => u,
  "{ ...u } (copy)": (u) => ({ ...u }),
  "{ ...u, 4 existing keys }": (u) => ({ ...u, input_tokens: 1, output_tokens: 2, cache_read_input_tokens: 3, cache_creation_input_tokens: 4 }),
  "{ ...u, 1 new key }": (u) => ({ ...u, a: 1 }),
  "{ ...u, 9 new keys }": (u) => ({ ...u, a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9 }),
  "completeUsage as written (spread + 13 keys)": (u) => ({
    ...u,
    input_tokens: num(u.input_tokens),
    output_tokens: num(u.output_tokens),
    cache_creation_input_tokens: num(u.cache_creation_input_tokens),
    cache_read_input_tokens: num(u.cache_read_input_tokens),
    cache_creation: u.cache_creation ?? null,
    inference_geo: u.inference_geo ?? null,
    output_tokens_details: u.output_tokens_details ?? null,
    server_tool_use: u.server_tool_use ?? null,
    service_tier: u.service_tier ?? null,
    speed: u.speed ?? null,
    cost: 0.000396,
    cost_details: u.cost_details ?? null,
    is_byok: false
  }),
  "completeUsage with Object.assign": (u) => Object.assign({}, u, fields(u)),
  "{ 9 new keys, ...u } (literal first)": (u) => ({ a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, ...u }),
  "planner requirements as written ({ ...needs, 2 new })": (u) => {
    const needs = requirementsOf(u)
    return { ...needs, documents: needs.documents, parameters: PARAMETERS, estimatedPromptTokens: u.input_tokens }
  },
  "planner requirements as a literal": (u) => {
    const needs = requirementsOf(u)
    return {
      tools: needs.tools,
      images: needs.images,
      documents: needs.documents,
      maxTokens: needs.maxTokens,
      parameters: PARAMETERS,
      estimatedPromptTokens: u.input_tokens
    }
  },
  "message_delta usage as written ({ ...delta, cost })": (u) => ({ ...u, output_tokens: 24, cost: 0.000396 }),
  "message_delta usage with Object.assign": (u) => Object.assign({}, u, { output_tokens: 24, cost: 0.000396 })
}

// Both completeUsage variants must produce the same JSON.
const u0 = JSON.parse(text)
if (JSON.stringify(cases["completeUsage as written (spread + 13 keys)"](u0)) !== JSON.stringify(cases["completeUsage with Object.assign"](u0))) {
  throw new Error("the two completeUsage variants differ")
}

let sink = 0
console.log(`node ${process.version}: CPU ns per object, JSON.parse of the small usage object included (best of 6 rounds)`)
for (const [name, f] of Object.entries(cases)) {
  let best = Infinity
  for (let round = 0; round < 7; round++) {
    const before = process.cpuUsage()
    for (let i = 0; i < N; i++) sink += f(JSON.parse(text)).input_tokens ?? 1
    const used = process.cpuUsage(before)
    if (round > 0) best = Math.min(best, ((used.user + used.system) * 1000) / N)
  }
  console.log(`  ${name.padEnd(54)} ${String(Math.round(best)).padStart(6)} ns`)
}
if (sink === 0) console.log("(unreachable: keeps the results alive)")
