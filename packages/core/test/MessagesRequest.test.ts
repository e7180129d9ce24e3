import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import type { MessagesRequest } from "../src/messages/MessagesRequest.js"
import { validate } from "../src/messages/MessagesRequest.js"
import * as ProviderPreferences from "../src/routing/ProviderPreferences.js"

const base = {
  model: "anthropic/claude-sonnet-4",
  max_tokens: 1024,
  messages: [{ role: "user", content: "Hello, Claude" }]
}

const body = (fields: Record<string, unknown>) => ({ ...base, ...fields })

const user = (...content: Array<unknown>) => body({ messages: [{ role: "user", content }] })

const accepts = (input: unknown): MessagesRequest => {
  const result = validate(input)
  if (Either.isLeft(result)) {
    assert.fail(`expected the body to be accepted, got: ${result.left.message}`)
  }
  return result.right
}

/** Asserts an `InvalidRequest` whose `param` is `param` and whose message starts with it (and contains `fragment`). */
const rejects = (input: unknown, param: string | undefined, fragment?: string) => {
  const result = validate(input)
  if (Either.isRight(result)) {
    assert.fail(`expected an InvalidRequest for ${param}, but the body was accepted`)
  }
  const error = result.left
  assert.strictEqual(error._tag, "InvalidRequest")
  assert.strictEqual(error.param, param, error.message)
  assert.isTrue(error.message.startsWith(`${param ?? "request body"}: `), error.message)
  if (fragment !== undefined) assert.include(error.message, fragment)
  return error
}

const chars = (n: number) => "x".repeat(n)

describe("MessagesRequest", () => {
  describe("required fields and shape", () => {
    it("accepts a minimal request and decodes it without changing values", () => {
      const input = {
        model: "anthropic/claude-sonnet-4",
        max_tokens: 1024,
        system: "You are terse.",
        temperature: 0.2,
        top_p: 0.9,
        top_k: 40,
        stop_sequences: ["\n\nHuman:"],
        stream: true,
        metadata: { user_id: "user-123" },
        messages: [
          { role: "user", content: "Hello" },
          { role: "assistant", content: [{ type: "text", text: "Hi!" }] }
        ]
      }
      assert.deepStrictEqual<unknown>(accepts(input), input)
    })

    it("rejects a missing model, naming the field", () => {
      const error = rejects({ messages: [] }, "model")
      assert.strictEqual(error.message, "model: is missing")
    })

    it("rejects a non-string model", () => {
      rejects(body({ model: 42 }), "model", "Expected string, actual 42")
    })

    it("requires messages but accepts null", () => {
      rejects({ model: "m" }, "messages", "is missing")
      accepts({ model: "m", messages: null })
      rejects(body({ messages: "hi" }), "messages", "Expected an array of messages")
    })

    it("rejects a body that is not a JSON object, without a param", () => {
      for (const input of [[], "hello", 42, null, true]) {
        const error = rejects(input, undefined, "Expected a JSON object")
        assert.isUndefined(error.param)
      }
    })

    it("accepts unknown fields at the top level and in nested objects", () => {
      const decoded = accepts(body({
        some_future_field: { nested: true },
        anthropic_beta: ["x"],
        messages: [{ role: "user", content: [{ type: "text", text: "hi", future: 1 }], name: "bob" }],
        metadata: { user_id: null, tenant: "t" },
        tools: [{ name: "t", input_schema: { type: "object", $defs: {} }, input_examples: [] }]
      }))
      assert.strictEqual(decoded.model, base.model)
    })

    it("accepts the roles user, assistant and system and rejects others", () => {
      for (const role of ["user", "assistant", "system"]) accepts(body({ messages: [{ role, content: "x" }] }))
      rejects(body({ messages: [{ role: "bot", content: "x" }] }), "messages[0].role", "\"user\" | \"assistant\"")
      rejects(body({ messages: [{ content: "x" }] }), "messages[0].role", "is missing")
    })

    it("requires message content as a string or an array of blocks", () => {
      rejects(body({ messages: [{ role: "user" }] }), "messages[0].content")
      rejects(body({ messages: [{ role: "user", content: 5 }] }), "messages[0].content", "a string or an array")
    })

    it("accepts clear_at and output_config on a message", () => {
      accepts(body({
        messages: [{ role: "user", content: "x", clear_at: { type: "marker" }, output_config: { effort: "low" } }]
      }))
      rejects(body({ messages: [{ role: "user", content: "x", clear_at: "now" }] }), "messages[0].clear_at")
    })
  })

  describe("fallbacks", () => {
    const entries = (n: number) => Array.from({ length: n }, (_, i) => ({ model: `vendor/model-${i}` }))

    it("accepts at most 3 entries", () => {
      accepts(body({ fallbacks: entries(3) }))
      accepts(body({ fallbacks: entries(0) }))
      const error = rejects(body({ fallbacks: entries(4) }), "fallbacks")
      assert.strictEqual(error.message, "fallbacks: at most 3 entries are allowed, got 4")
    })

    it("accepts null", () => {
      accepts(body({ fallbacks: null }))
    })

    it("rejects any key other than model in an entry", () => {
      rejects(
        body({ fallbacks: [{ model: "a" }, { model: "b", provider: { order: ["x"] } }] }),
        "fallbacks[1].provider"
      )
      rejects(body({ fallbacks: [{ model: "a", max_tokens: 10 }] }), "fallbacks[0].max_tokens", "is unexpected")
    })

    it("requires a string model in each entry", () => {
      rejects(body({ fallbacks: [{}] }), "fallbacks[0].model", "is missing")
      rejects(body({ fallbacks: [{ model: 1 }] }), "fallbacks[0].model")
      rejects(body({ fallbacks: ["vendor/model"] }), "fallbacks[0]", "Expected a fallback object")
    })

    it("cannot be combined with models", () => {
      rejects(body({ fallbacks: entries(1), models: ["a", "b"] }), "fallbacks", "cannot be combined with models")
      rejects(body({ fallbacks: [], models: ["a"] }), "fallbacks")
      accepts(body({ fallbacks: null, models: ["a", "b"] }))
      accepts(body({ models: ["a", "b"] }))
    })
  })

  describe("provider preferences", () => {
    it("accepts every preference, decoded unchanged; null means absent", () => {
      const provider = {
        order: ["anthropic", "Bedrock"],
        only: ["anthropic", "bedrock", "vertex"],
        ignore: ["azure"],
        allow_fallbacks: false,
        require_parameters: true,
        data_collection: "deny",
        zdr: true,
        enforce_distillable_text: true,
        quantizations: ["fp8", "bf16", "unknown"],
        sort: { by: "throughput", partition: "none" },
        max_price: { prompt: 3, completion: "15.5", request: 0, image: "0.01" },
        preferred_min_throughput: { p50: 40, p90: 10 },
        preferred_max_latency: 2000
      }
      assert.deepStrictEqual<unknown>(accepts(body({ provider })).provider, provider)
      accepts(body({ provider: {} }))
      accepts(body({ provider: { sort: "price", preferred_min_throughput: 50, preferred_max_latency: { p99: 9000 } } }))
      accepts(body({ provider: { sort: { by: "latency" } } }))
      accepts(body({ provider: { sort: { partition: "model" } } }))
      accepts(body({
        provider: {
          order: null,
          only: null,
          ignore: null,
          allow_fallbacks: null,
          require_parameters: null,
          data_collection: null,
          zdr: null,
          enforce_distillable_text: null,
          quantizations: null,
          sort: null,
          max_price: null,
          preferred_min_throughput: null,
          preferred_max_latency: null
        }
      }))
    })

    it("rejects an unknown key, naming it", () => {
      const error = rejects(body({ provider: { order: ["a"], bogus: 1 } }), "provider.bogus", "is unexpected")
      assert.strictEqual(error._tag, "InvalidRequest")
      rejects(body({ provider: { sort: { by: "price", partion: "none" } } }), "provider.sort.partion", "is unexpected")
      rejects(body({ provider: { max_price: { tokens: 1 } } }), "provider.max_price.tokens", "is unexpected")
      rejects(body({ provider: { preferred_max_latency: { p95: 1 } } }), "provider.preferred_max_latency.p95")
    })

    it("validates each preference's type and values", () => {
      rejects(body({ provider: "anthropic" }), "provider", "Expected an object")
      rejects(body({ provider: null }), "provider")
      rejects(body({ provider: { order: "anthropic" } }), "provider.order", "Expected an array of provider names")
      rejects(body({ provider: { only: [1] } }), "provider.only[0]")
      rejects(body({ provider: { ignore: {} } }), "provider.ignore")
      rejects(body({ provider: { allow_fallbacks: "no" } }), "provider.allow_fallbacks", "Expected a boolean")
      rejects(body({ provider: { require_parameters: 1 } }), "provider.require_parameters")
      rejects(body({ provider: { zdr: "true" } }), "provider.zdr")
      rejects(body({ provider: { enforce_distillable_text: "yes" } }), "provider.enforce_distillable_text", "a boolean")
      rejects(body({ provider: { data_collection: "never" } }), "provider.data_collection", "\"allow\" | \"deny\"")
      rejects(body({ provider: { quantizations: ["fp7"] } }), "provider.quantizations[0]", "\"fp8\"")
      rejects(body({ provider: { sort: "cheapest" } }), "provider.sort", "\"price\" | \"throughput\" | \"latency\"")
      rejects(body({ provider: { sort: 1 } }), "provider.sort", "a string or a {by, partition} object")
      rejects(body({ provider: { sort: { by: "speed" } } }), "provider.sort.by")
      rejects(body({ provider: { sort: { partition: "all" } } }), "provider.sort.partition", "\"model\" | \"none\"")
      rejects(body({ provider: { max_price: 5 } }), "provider.max_price")
      rejects(body({ provider: { max_price: { prompt: -1 } } }), "provider.max_price.prompt", "non-negative")
      rejects(body({ provider: { max_price: { completion: "1e-6" } } }), "provider.max_price.completion", "decimal")
      rejects(body({ provider: { max_price: { request: true } } }), "provider.max_price.request")
      rejects(body({ provider: { preferred_min_throughput: "fast" } }), "provider.preferred_min_throughput")
      rejects(body({ provider: { preferred_max_latency: { p50: -5 } } }), "provider.preferred_max_latency.p50")
    })
  })

  describe("route (deprecated)", () => {
    it("accepts \"fallback\", \"sort\" or an object", () => {
      assert.strictEqual(accepts(body({ route: "fallback" })).route, "fallback")
      assert.strictEqual(accepts(body({ route: "sort" })).route, "sort")
      accepts(body({ route: { kind: "fallback" } }))
      rejects(body({ route: "cheapest" }), "route", "\"fallback\" | \"sort\"")
      rejects(body({ route: null }), "route")
      rejects(body({ route: 1 }), "route")
    })

    it("maps to the sort partition of the effective preferences", () => {
      const effective = (fields: Record<string, unknown>) => {
        const request = accepts(body(fields))
        return ProviderPreferences.effective(request.provider, request.route)
      }
      assert.deepStrictEqual(effective({ route: "fallback" }), { sort: { partition: "model" } })
      assert.deepStrictEqual(effective({ route: "sort", provider: { sort: "price", zdr: true } }), {
        sort: { by: "price", partition: "none" },
        zdr: true
      })
      assert.deepStrictEqual(effective({ route: "sort", provider: { sort: { by: "latency", partition: "model" } } }), {
        sort: { by: "latency", partition: "model" }
      })
      assert.deepStrictEqual(effective({ route: { kind: "x" }, provider: { only: ["a"] } }), { only: ["a"] })
      assert.strictEqual(effective({}), undefined)
    })
  })

  describe("user and session_id", () => {
    for (const field of ["user", "session_id"]) {
      it(`${field}: at most 256 characters`, () => {
        accepts(body({ [field]: chars(256) }))
        accepts(body({ [field]: "" }))
        const error = rejects(body({ [field]: chars(257) }), field)
        assert.strictEqual(error.message, `${field}: must be at most 256 characters, got 257`)
        rejects(body({ [field]: 7 }), field, "Expected string")
      })

      it(`${field}: counts characters, not UTF-16 code units`, () => {
        accepts(body({ [field]: "😀".repeat(256) }))
        rejects(body({ [field]: "😀".repeat(257) }), field, "got 257")
      })
    }
  })

  describe("output_config", () => {
    const budget = (task_budget: unknown) => body({ output_config: { task_budget } })

    it("task_budget.total is an integer of at least 20000", () => {
      accepts(budget({ type: "tokens", total: 20000 }))
      accepts(budget({ type: "tokens", total: 1_000_000 }))
      rejects(
        budget({ type: "tokens", total: 19999 }),
        "output_config.task_budget.total",
        "at least 20000, got 19999"
      )
      rejects(budget({ type: "tokens", total: 20000.5 }), "output_config.task_budget.total", "integer")
      rejects(budget({ type: "tokens" }), "output_config.task_budget.total", "is missing")
    })

    it("task_budget.remaining is an integer of at least 0, or null", () => {
      accepts(budget({ type: "tokens", total: 20000, remaining: 0 }))
      accepts(budget({ type: "tokens", total: 20000, remaining: null }))
      rejects(budget({ type: "tokens", total: 20000, remaining: -1 }), "output_config.task_budget.remaining")
      rejects(budget({ type: "tokens", total: 20000, remaining: 0.5 }), "output_config.task_budget.remaining")
    })

    it("task_budget.type is only 'tokens'; task_budget may be null", () => {
      rejects(budget({ type: "dollars", total: 20000 }), "output_config.task_budget.type", "\"tokens\"")
      accepts(budget(null))
    })

    it("effort is one of low, medium, high, xhigh, max, or null", () => {
      for (const effort of ["low", "medium", "high", "xhigh", "max", null]) accepts(body({ output_config: { effort } }))
      rejects(body({ output_config: { effort: "extreme" } }), "output_config.effort", "\"xhigh\"")
    })

    it("format is {type: 'json_schema', schema} or null", () => {
      const schema = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"] }
      accepts(body({ output_config: { format: { type: "json_schema", schema } } }))
      accepts(body({ output_config: { format: null } }))
      rejects(body({ output_config: { format: { type: "json_object", schema } } }), "output_config.format.type")
      rejects(body({ output_config: { format: { type: "json_schema" } } }), "output_config.format.schema")
    })

    it("must be an object", () => {
      rejects(body({ output_config: "high" }), "output_config", "Expected an output_config object")
    })
  })

  describe("router plugins", () => {
    for (const id of ["auto-router", "auto-beta-router"]) {
      const plugin = (fields: Record<string, unknown>) => body({ plugins: [{ id, ...fields }] })

      for (const list of ["allowed_models", "excluded_models"]) {
        const param = `plugins[0].${list}`

        it(`${id} ${list}: at most 1024 patterns`, () => {
          accepts(plugin({ [list]: Array.from({ length: 1024 }, () => "vendor/*") }))
          const error = rejects(plugin({ [list]: Array.from({ length: 1025 }, () => "vendor/*") }), param)
          assert.strictEqual(error.message, `${param}: at most 1024 patterns are allowed, got 1025`)
        })

        it(`${id} ${list}: each pattern at most 1024 characters`, () => {
          accepts(plugin({ [list]: ["anthropic/*", chars(1024)] }))
          rejects(plugin({ [list]: ["anthropic/*", chars(1025)] }), `${param}[1]`, "at most 1024 characters, got 1025")
        })

        it(`${id} ${list}: at most 65536 characters in total`, () => {
          const full = Array.from({ length: 64 }, () => chars(1024))
          accepts(plugin({ [list]: full }))
          rejects(plugin({ [list]: [...full, "x"] }), param, "at most 65536 characters in total are allowed, got 65537")
          // characters, not UTF-16 code units: 65 patterns of 512 emoji are 33,280 characters (66,560 code units)
          const emoji = Array.from({ length: 65 }, () => "😀".repeat(512))
          accepts(plugin({ [list]: emoji }))
          const wide = Array.from({ length: 64 }, () => "😀".repeat(1024))
          accepts(plugin({ [list]: wide }))
          rejects(
            plugin({ [list]: [...wide, "😀"] }),
            param,
            "at most 65536 characters in total are allowed, got 65537"
          )
        })

        it(`${id} ${list}: an array of strings`, () => {
          rejects(plugin({ [list]: "vendor/*" }), param, "Expected an array of model patterns")
          rejects(plugin({ [list]: ["ok", 3] }), `${param}[1]`)
        })
      }

      it(`${id} cost_tier is one of low, medium, high, xhigh, max`, () => {
        for (const cost_tier of ["low", "medium", "high", "xhigh", "max"]) accepts(plugin({ cost_tier }))
        rejects(plugin({ cost_tier: "cheap" }), "plugins[0].cost_tier")
      })

      it(`${id} cost_quality_tradeoff is an integer from 0 to 10`, () => {
        accepts(plugin({ cost_quality_tradeoff: 0 }))
        accepts(plugin({ cost_quality_tradeoff: 10 }))
        for (const bad of [-1, 11, 2.5]) {
          rejects(
            plugin({ cost_quality_tradeoff: bad }),
            "plugins[0].cost_quality_tradeoff",
            `from 0 to 10, got ${bad}`
          )
        }
      })

      it(`${id} enabled is a boolean; false is accepted`, () => {
        accepts(plugin({ enabled: false }))
        accepts(plugin({ enabled: true }))
        rejects(plugin({ enabled: "no" }), "plugins[0].enabled")
      })
    }

    it("pin_model is only accepted on auto-router", () => {
      accepts(body({ plugins: [{ id: "auto-router", pin_model: true }] }))
      accepts(body({ plugins: [{ id: "auto-router", pin_model: false }] }))
      rejects(body({ plugins: [{ id: "auto-router", pin_model: "yes" }] }), "plugins[0].pin_model")
      rejects(body({ plugins: [{ id: "auto-beta-router", pin_model: true }] }), "plugins[0].pin_model", "auto-router")
      rejects(body({ plugins: [{ id: "auto-beta-router", pin_model: false }] }), "plugins[0].pin_model")
    })
  })

  describe("fusion plugin", () => {
    const fusion = (fields: Record<string, unknown>) => body({ plugins: [{ id: "fusion", ...fields }] })
    const models = (n: number) => Array.from({ length: n }, (_, i) => `vendor/model-${i}`)

    it("analysis_models has 1 to 8 entries", () => {
      accepts(fusion({ analysis_models: models(1) }))
      accepts(fusion({ analysis_models: models(8) }))
      rejects(
        fusion({ analysis_models: models(0) }),
        "plugins[0].analysis_models",
        "at least 1 model is required, got 0"
      )
      rejects(
        fusion({ analysis_models: models(9) }),
        "plugins[0].analysis_models",
        "at most 8 models are allowed, got 9"
      )
    })

    it("max_tool_calls is an integer from 1 to 16", () => {
      accepts(fusion({ max_tool_calls: 1 }))
      accepts(fusion({ max_tool_calls: 16 }))
      for (const bad of [0, 17, 1.5]) rejects(fusion({ max_tool_calls: bad }), "plugins[0].max_tool_calls")
    })

    it("preset is one of general-high, general-budget, general-fast", () => {
      for (const preset of ["general-high", "general-budget", "general-fast"]) accepts(fusion({ preset }))
      rejects(fusion({ preset: "general-slow" }), "plugins[0].preset")
    })

    it("accepts model and tools; tools entries need a string type", () => {
      accepts(fusion({
        model: "vendor/analyst",
        tools: [{ type: "web_search", parameters: { max_results: 3 } }, { type: "web_fetch" }],
        enabled: false
      }))
      accepts(fusion({ tools: [] }))
      rejects(fusion({ tools: [{ parameters: {} }] }), "plugins[0].tools[0].type", "is missing")
    })
  })

  describe("plugins", () => {
    const ids = [
      "auto-router",
      "auto-beta-router",
      "context-compression",
      "file-parser",
      "fusion",
      "moderation",
      "pareto-router",
      "response-healing",
      "switchyard-router",
      "web",
      "web-fetch"
    ]

    it("accepts every allowed id", () => {
      accepts(body({ plugins: ids.map((id) => ({ id })) }))
      accepts(body({ plugins: ids.map((id) => ({ id, enabled: false })) }))
    })

    it("rejects an unknown id, naming the id field", () => {
      const error = rejects(body({ plugins: [{ id: "web" }, { id: "telepathy" }] }), "plugins[1].id", "\"telepathy\"")
      assert.include(error.message, "\"auto-router\"")
    })

    it("rejects a plugin without an id", () => {
      rejects(body({ plugins: [{ enabled: true }] }), "plugins[0].id", "is missing")
      rejects(body({ plugins: ["web"] }), "plugins[0]", "Expected a plugin object")
    })

    it("validates context-compression and file-parser fields", () => {
      accepts(body({ plugins: [{ id: "context-compression", engine: "middle-out" }] }))
      rejects(body({ plugins: [{ id: "context-compression", engine: 1 }] }), "plugins[0].engine")
      rejects(body({ plugins: [{ id: "file-parser", pdf: { engine: 1 } }] }), "plugins[0].pdf.engine")
    })

    it("file-parser: pdf.engine is one of the known engines; mistral-ocr is refused (the gateway has no OCR)", () => {
      for (const engine of ["pdf-text", "native"]) accepts(body({ plugins: [{ id: "file-parser", pdf: { engine } }] }))
      accepts(body({ plugins: [{ id: "file-parser", pdf: {} }] }))
      rejects(
        body({ plugins: [{ id: "web" }, { id: "file-parser", pdf: { engine: "bogus-engine" } }] }),
        "plugins[1].pdf.engine",
        "Expected \"pdf-text\" | \"mistral-ocr\" | \"native\", actual \"bogus-engine\""
      )
      rejects(
        body({ plugins: [{ id: "file-parser", pdf: { engine: "mistral-ocr" } }] }),
        "plugins[0].pdf.engine",
        "needs an OCR service"
      )
    })

    it("accepts unknown fields on plugins whose fields are not shown", () => {
      accepts(body({ plugins: [{ id: "web", max_results: 5, search_prompt: "x" }, { id: "moderation", level: 2 }] }))
    })
  })

  describe("speed and scalars", () => {
    it("speed is 'fast' or 'standard'", () => {
      accepts(body({ speed: "fast" }))
      accepts(body({ speed: "standard" }))
      rejects(body({ speed: "turbo" }), "speed", "\"fast\" | \"standard\", actual \"turbo\"")
    })

    it("max_tokens and top_k are integers, max_tokens at least 1", () => {
      rejects(body({ max_tokens: 10.5 }), "max_tokens", "must be an integer of at least 1, got 10.5")
      rejects(body({ max_tokens: "10" }), "max_tokens")
      rejects(body({ max_tokens: 0 }), "max_tokens", "must be an integer of at least 1, got 0")
      rejects(body({ max_tokens: -1 }), "max_tokens", "must be an integer of at least 1, got -1")
      accepts(body({ max_tokens: 1 }))
      rejects(body({ top_k: 2.5 }), "top_k", "must be an integer")
      accepts(body({ top_k: 5 }))
    })

    it("checks the other scalar fields", () => {
      rejects(body({ temperature: "hot" }), "temperature")
      rejects(body({ stream: "yes" }), "stream")
      rejects(body({ stop_sequences: ["a", 1] }), "stop_sequences[1]")
      rejects(body({ models: "a" }), "models")
      rejects(body({ service_tier: 1 }), "service_tier")
      accepts(body({ service_tier: "auto" }))
    })

    it("metadata.user_id is a string or null", () => {
      accepts(body({ metadata: { user_id: null } }))
      accepts(body({ metadata: {} }))
      rejects(body({ metadata: { user_id: 5 } }), "metadata.user_id")
    })

    it("system is a string or an array of text blocks", () => {
      accepts(body({ system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }] }))
      rejects(body({ system: [{ type: "image", source: {} }] }), "system[0].type", "\"text\"")
      rejects(body({ system: 5 }), "system", "a string or an array of text blocks")
    })

    it("accepts any object for provider, route, trace and stop_server_tools_when; safeguards is a nullable array", () => {
      accepts(body({
        provider: { order: ["anthropic", "bedrock"], allow_fallbacks: false, sort: "price" },
        route: { kind: "fallback" },
        trace: { trace_id: "abc", span_name: "x" },
        stop_server_tools_when: { max_turns: 3 },
        safeguards: [{ type: "pii" }]
      }))
      accepts(body({ safeguards: null }))
      rejects(body({ provider: "anthropic" }), "provider", "Expected an object")
      rejects(body({ route: [] }), "route")
      rejects(body({ trace: true }), "trace")
      rejects(body({ stop_server_tools_when: 1 }), "stop_server_tools_when")
      rejects(body({ safeguards: {} }), "safeguards")
    })
  })

  describe("cache_control", () => {
    it("top level: type 'ephemeral' with an optional ttl", () => {
      accepts(body({ cache_control: { type: "ephemeral" } }))
      accepts(body({ cache_control: { type: "ephemeral", ttl: "1h" } }))
      rejects(body({ cache_control: { type: "persistent" } }), "cache_control.type", "\"ephemeral\"")
      rejects(body({ cache_control: {} }), "cache_control.type", "is missing")
      rejects(body({ cache_control: "ephemeral" }), "cache_control", "Expected a cache_control object")
      rejects(body({ cache_control: { type: "ephemeral", ttl: 300 } }), "cache_control.ttl")
    })

    it("on a content block", () => {
      accepts(user({ type: "text", text: "x", cache_control: { type: "ephemeral", ttl: "5m" } }))
      rejects(
        user({ type: "text", text: "x" }, { type: "text", text: "y", cache_control: { type: "always" } }),
        "messages[0].content[1].cache_control.type"
      )
    })

    it("on a tool, a tool_result, a system block and an unknown block kind", () => {
      rejects(
        body({ tools: [{ name: "t", input_schema: { type: "object" }, cache_control: { type: "x" } }] }),
        "tools[0].cache_control.type"
      )
      rejects(
        user({ type: "tool_result", tool_use_id: "toolu_1", content: "ok", cache_control: { type: "x" } }),
        "messages[0].content[0].cache_control.type"
      )
      rejects(
        body({ system: [{ type: "text", text: "s", cache_control: { type: "x" } }] }),
        "system[0].cache_control.type"
      )
      rejects(
        user({ type: "bash_code_execution_tool_result", tool_use_id: "x", cache_control: { type: "x" } }),
        "messages[0].content[0].cache_control.type"
      )
    })
  })

  describe("content blocks", () => {
    it("accepts a tool_use / tool_result round trip with thinking and tools", () => {
      accepts({
        model: "anthropic/claude-sonnet-4",
        max_tokens: 2048,
        thinking: { type: "enabled", budget_tokens: 1024 },
        tools: [{
          name: "get_weather",
          description: "Get the current weather in a given location",
          input_schema: {
            type: "object",
            properties: { location: { type: "string", description: "The city and state, e.g. San Francisco, CA" } },
            required: ["location"]
          }
        }],
        tool_choice: { type: "auto" },
        messages: [
          { role: "user", content: "What is the weather like in San Francisco?" },
          {
            role: "assistant",
            content: [
              {
                type: "thinking",
                thinking: "The user wants the weather; I should call get_weather.",
                signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."
              },
              { type: "text", text: "Let me check the weather." },
              {
                type: "tool_use",
                id: "toolu_01A09q90qw90lq917835lq9",
                name: "get_weather",
                input: { location: "San Francisco, CA" }
              }
            ]
          },
          {
            role: "user",
            content: [
              {
                type: "tool_result",
                tool_use_id: "toolu_01A09q90qw90lq917835lq9",
                content: "15 degrees",
                is_error: false
              },
              { type: "text", text: "Thanks" }
            ]
          }
        ]
      })
    })

    it("accepts tool_result content arrays of text, image, tool_reference, search_result and document", () => {
      accepts(user({
        type: "tool_result",
        tool_use_id: "toolu_01",
        content: [
          { type: "text", text: "result" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
          { type: "tool_reference", tool_name: "get_weather" },
          {
            type: "search_result",
            source: "https://docs.example.com/api",
            title: "API Reference",
            content: [{ type: "text", text: "The API returns JSON." }]
          },
          { type: "document", source: { type: "text", media_type: "text/plain", data: "The grass is green." } }
        ]
      }))
      rejects(
        user({ type: "tool_result", tool_use_id: "t", content: [{ type: "tool_reference" }] }),
        "messages[0].content[0].content[0].tool_name",
        "is missing"
      )
      rejects(user({ type: "tool_result", content: "x" }), "messages[0].content[0].tool_use_id", "is missing")
      rejects(user({ type: "tool_result", tool_use_id: "t", is_error: "no" }), "messages[0].content[0].is_error")
    })

    it("accepts images with base64, url and file sources", () => {
      accepts(user(
        {
          type: "image",
          source: { type: "base64", media_type: "image/jpeg", data: "/9j/4AAQSkZJRg==" },
          cache_control: { type: "ephemeral" }
        },
        {
          type: "image",
          source: { type: "url", url: "https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus.jpg" }
        },
        { type: "image", source: { type: "file", file_id: "file_011CNha8iCJcU1wXNR6q4V8w" } },
        { type: "text", text: "Describe these images." }
      ))
      rejects(user({ type: "image", source: { type: "url" } }), "messages[0].content[0].source.url", "is missing")
      rejects(user({ type: "image" }), "messages[0].content[0].source")
    })

    it("accepts documents", () => {
      accepts(user(
        {
          type: "document",
          source: { type: "base64", media_type: "application/pdf", data: "JVBERi0xLjQK" },
          title: "Annual report",
          context: "Fiscal year 2024",
          citations: { enabled: true },
          cache_control: { type: "ephemeral" }
        },
        {
          type: "document",
          source: { type: "url", url: "https://assets.anthropic.com/m/1cd9d098ac3e6467/original/x.pdf" }
        },
        {
          type: "document",
          source: { type: "content", content: [{ type: "text", text: "First chunk" }] },
          title: null
        },
        { type: "text", text: "Summarise the documents." }
      ))
      rejects(
        user({ type: "document", source: { type: "base64", data: "x" } }),
        "messages[0].content[0].source.media_type"
      )
    })

    it("accepts thinking with a signature and redacted_thinking", () => {
      accepts(body({
        messages: [
          { role: "user", content: "Are there infinitely many primes?" },
          {
            role: "assistant",
            content: [
              {
                type: "thinking",
                thinking: "Euclid's argument applies.",
                signature: "WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve"
              },
              { type: "redacted_thinking", data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP" },
              { type: "text", text: "Yes." }
            ]
          }
        ]
      }))
      rejects(
        user({ type: "thinking", thinking: "hmm" }),
        "messages[0].content[0].signature",
        "is missing"
      )
      rejects(user({ type: "redacted_thinking" }), "messages[0].content[0].data", "is missing")
    })

    it("accepts server_tool_use and web_search_tool_result with results", () => {
      accepts(body({
        messages: [
          { role: "user", content: "When was Claude Shannon born?" },
          {
            role: "assistant",
            content: [
              {
                type: "server_tool_use",
                id: "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
                name: "web_search",
                input: { query: "claude shannon birth date" }
              },
              {
                type: "web_search_tool_result",
                tool_use_id: "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
                content: [{
                  type: "web_search_result",
                  url: "https://en.wikipedia.org/wiki/Claude_Shannon",
                  title: "Claude Shannon - Wikipedia",
                  encrypted_content: "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y...",
                  page_age: "April 30, 2025"
                }]
              },
              { type: "text", text: "Claude Shannon was born on April 30, 1916." }
            ]
          }
        ]
      }))
      rejects(user({ type: "server_tool_use", name: "web_search", input: {} }), "messages[0].content[0].id")
    })

    it("accepts a web_search_tool_result error with every error_code and rejects others", () => {
      const error = (error_code: unknown) =>
        user({
          type: "web_search_tool_result",
          tool_use_id: "srvtoolu_01",
          content: { type: "web_search_tool_result_error", error_code }
        })
      for (
        const code of ["invalid_tool_input", "unavailable", "max_uses_exceeded", "too_many_requests", "query_too_long"]
      ) {
        accepts(error(code))
      }
      rejects(error("exploded"), "messages[0].content[0].content.error_code", "\"query_too_long\"")
      rejects(
        user({ type: "web_search_tool_result", tool_use_id: "s", content: { type: "oops" } }),
        "messages[0].content[0].content.type"
      )
      rejects(
        user({ type: "web_search_tool_result", tool_use_id: "s", content: [{ type: "web_search_result", url: 1 }] }),
        "messages[0].content[0].content[0].url"
      )
    })

    it("accepts search_result blocks", () => {
      accepts(user({
        type: "search_result",
        source: "https://docs.company.com/product-guide",
        title: "Product Configuration Guide",
        content: [{ type: "text", text: "To configure the product, navigate to Settings." }],
        citations: { enabled: true },
        cache_control: { type: "ephemeral" }
      }))
      rejects(
        user({ type: "search_result", source: "s", title: "t", content: [{ type: "image" }] }),
        "messages[0].content[0].content[0].type"
      )
    })

    it("accepts compaction blocks with string or null content", () => {
      accepts(user({ type: "compaction", content: "Summary of the earlier turns." }))
      accepts(user({ type: "compaction", content: null, encrypted_content: "Ev0BCkYIBRgCKkA..." }))
      rejects(user({ type: "compaction" }), "messages[0].content[0].content", "is missing")
      rejects(user({ type: "compaction", content: 3 }), "messages[0].content[0].content")
    })

    it("accepts unknown block kinds as generic {type} objects", () => {
      const decoded = accepts(user(
        { type: "advisor_tool_result", tool_use_id: "srvtoolu_1", content: { type: "advice", text: "ok" } },
        { type: "bash_code_execution_tool_result", tool_use_id: "srvtoolu_2", content: { stdout: "hi" } },
        { type: "tool_addition", tool_name: "get_weather" },
        { type: "some_future_block", anything: [1, 2, 3] }
      ))
      assert.deepStrictEqual(decoded.messages?.[0].content, [
        { type: "advisor_tool_result", tool_use_id: "srvtoolu_1", content: { type: "advice", text: "ok" } },
        { type: "bash_code_execution_tool_result", tool_use_id: "srvtoolu_2", content: { stdout: "hi" } },
        { type: "tool_addition", tool_name: "get_weather" },
        { type: "some_future_block", anything: [1, 2, 3] }
      ])
    })

    it("names the bad field of a known block kind, not the union", () => {
      const error = rejects(
        user({ type: "text", text: "ok" }, { type: "text", text: 42 }),
        "messages[0].content[1].text"
      )
      assert.strictEqual(error.message, "messages[0].content[1].text: Expected string, actual 42")
      rejects(user({ type: "tool_use", id: "toolu_1", input: {} }), "messages[0].content[0].name", "is missing")
    })

    it("requires a string type on every block", () => {
      rejects(user({ type: "text", text: "a" }, { text: "b" }), "messages[0].content[1].type", "is missing")
      rejects(user({ type: 7 }), "messages[0].content[0].type", "Expected a string")
      rejects(user("just a string"), "messages[0].content[0]", "Expected a content block")
    })
  })

  describe("tools", () => {
    const tool = (t: unknown) => body({ tools: [t] })

    it("accepts custom tools with type absent or 'custom'", () => {
      const input_schema = {
        type: "object",
        properties: { q: { type: "string" } },
        required: ["q"],
        additionalProperties: false
      }
      accepts(tool({ name: "search", input_schema }))
      accepts(
        tool({ type: "custom", name: "search", input_schema, description: "d", strict: true, defer_loading: false })
      )
      accepts(tool({ name: "noop", input_schema: {} }))
      accepts(tool({ name: "noop", input_schema: { type: "object", required: null } }))
    })

    it("validates custom tool fields", () => {
      rejects(tool({ name: "search" }), "tools[0].input_schema", "is missing")
      rejects(tool({ input_schema: {} }), "tools[0].name", "is missing")
      rejects(tool({ name: "s", input_schema: { type: "array" } }), "tools[0].input_schema.type")
      rejects(tool({ name: "s", input_schema: { required: [1] } }), "tools[0].input_schema.required[0]")
      rejects(tool({ name: "s", input_schema: {}, strict: "yes" }), "tools[0].strict")
    })

    it("accepts bash and text editor tools with their fixed names", () => {
      accepts(tool({ type: "bash_20250124", name: "bash" }))
      accepts(tool({ type: "text_editor_20250124", name: "str_replace_editor", cache_control: { type: "ephemeral" } }))
      rejects(tool({ type: "bash_20250124", name: "shell" }), "tools[0].name", "\"bash\"")
      rejects(tool({ type: "text_editor_20250124" }), "tools[0].name", "is missing")
    })

    it("accepts web_search_20250305 and web_search_20260209", () => {
      accepts(tool({
        type: "web_search_20250305",
        name: "web_search",
        max_uses: 5,
        allowed_domains: ["example.com", "trusteddomain.org"],
        blocked_domains: null,
        user_location: {
          type: "approximate",
          city: "San Francisco",
          region: "California",
          country: "US",
          timezone: "America/Los_Angeles"
        }
      }))
      accepts(tool({ type: "web_search_20260209", name: "web_search", allowed_callers: ["direct"], max_uses: null }))
      rejects(tool({ type: "web_search_20250305", name: "search" }), "tools[0].name", "\"web_search\"")
      rejects(tool({ type: "web_search_20250305", name: "web_search", max_uses: 1.5 }), "tools[0].max_uses")
      rejects(
        tool({ type: "web_search_20250305", name: "web_search", allowed_domains: "a.com" }),
        "tools[0].allowed_domains"
      )
    })

    it("accepts advisor_20260301", () => {
      accepts(tool({
        type: "advisor_20260301",
        name: "advisor",
        model: "claude-opus-4-1",
        max_uses: 3,
        caching: { type: "ephemeral", ttl: "5m" },
        defer_loading: false
      }))
      accepts(tool({ type: "advisor_20260301", name: "advisor", model: "claude-opus-4-1", caching: null }))
      rejects(tool({ type: "advisor_20260301", name: "advisor" }), "tools[0].model", "is missing")
      rejects(
        tool({ type: "advisor_20260301", name: "advisor", model: "m", caching: { type: "x" } }),
        "tools[0].caching.type"
      )
      rejects(tool({ type: "advisor_20260301", name: "advisor", model: "m", max_uses: 2.5 }), "tools[0].max_uses")
    })

    it("accepts other server tools as generic {type} objects", () => {
      accepts(body({
        tools: [
          { type: "web_fetch_20250910", name: "web_fetch", max_uses: 3 },
          { type: "code_execution_20250825", name: "code_execution" },
          { type: "tool_search_tool_bm25_20251119", name: "tool_search_tool_bm25" },
          { type: "text_editor_20250728", name: "str_replace_based_edit_tool", max_characters: 10000 }
        ]
      }))
      rejects(tool({ type: 3, name: "x" }), "tools[0].type", "Expected a string")
      rejects(body({ tools: ["web_search"] }), "tools[0]", "Expected a tool object")
    })
  })

  describe("tool_choice and thinking", () => {
    it("tool_choice kinds", () => {
      accepts(body({ tool_choice: { type: "auto", disable_parallel_tool_use: true } }))
      accepts(body({ tool_choice: { type: "any" } }))
      accepts(body({ tool_choice: { type: "none" } }))
      accepts(body({ tool_choice: { type: "tool", name: "get_weather" } }))
      rejects(body({ tool_choice: { type: "tool" } }), "tool_choice.name", "is missing")
      rejects(
        body({ tool_choice: { type: "auto", disable_parallel_tool_use: "yes" } }),
        "tool_choice.disable_parallel_tool_use"
      )
      rejects(
        body({ tool_choice: { type: "required" } }),
        "tool_choice.type",
        "\"auto\" | \"any\" | \"none\" | \"tool\""
      )
      rejects(body({ tool_choice: "auto" }), "tool_choice", "Expected a tool_choice object")
    })

    it("thinking kinds", () => {
      accepts(body({ thinking: { type: "enabled", budget_tokens: 10000 } }))
      accepts(body({ thinking: { type: "disabled" } }))
      accepts(body({ thinking: { type: "adaptive", display: "summarized" } }))
      rejects(body({ thinking: { type: "enabled" } }), "thinking.budget_tokens", "is missing")
      rejects(body({ thinking: { type: "enabled", budget_tokens: 1.5 } }), "thinking.budget_tokens")
      rejects(body({ thinking: { type: "sometimes" } }), "thinking.type")
      rejects(body({ thinking: {} }), "thinking.type", "is missing")
    })
  })

  describe("context_management", () => {
    const edits = (...e: Array<unknown>) => body({ context_management: { edits: e } })

    it("accepts the three dated edit kinds", () => {
      accepts(edits(
        {
          type: "clear_tool_uses_20250919",
          trigger: { type: "input_tokens", value: 30000 },
          keep: { type: "tool_uses", value: 3 },
          clear_at_least: { type: "input_tokens", value: 5000 },
          exclude_tools: ["web_search"],
          clear_tool_inputs: true
        },
        { type: "clear_thinking_20251015", keep: { type: "thinking_turns", value: 2 } },
        { type: "compact_20260112", trigger: { type: "input_tokens", value: 150000 }, instructions: null }
      ))
      accepts(edits(
        { type: "clear_tool_uses_20250919", clear_tool_inputs: ["bash"], exclude_tools: null, clear_at_least: null },
        { type: "clear_tool_uses_20250919", trigger: { type: "tool_uses", value: 10 }, clear_tool_inputs: null },
        { type: "clear_thinking_20251015", keep: "all" },
        { type: "clear_thinking_20251015", keep: { type: "all" } },
        { type: "compact_20260112", pause_after_compaction: true, instructions: "Keep decisions.", trigger: null }
      ))
      accepts(body({ context_management: null }))
      accepts(body({ context_management: {} }))
    })

    it("rejects unknown kinds and bad fields", () => {
      rejects(edits({ type: "clear_everything" }), "context_management.edits[0].type", "\"compact_20260112\"")
      rejects(
        edits({ type: "clear_tool_uses_20250919", trigger: { type: "messages", value: 3 } }),
        "context_management.edits[0].trigger.type"
      )
      rejects(
        edits({ type: "clear_tool_uses_20250919", keep: { type: "tool_uses", value: 1.5 } }),
        "context_management.edits[0].keep.value"
      )
      rejects(
        edits({ type: "clear_tool_uses_20250919", clear_tool_inputs: "yes" }),
        "context_management.edits[0].clear_tool_inputs"
      )
      rejects(edits({ type: "clear_thinking_20251015", keep: "none" }), "context_management.edits[0].keep")
      rejects(
        edits({ type: "clear_thinking_20251015", keep: { type: "thinking_turns" } }),
        "context_management.edits[0].keep.value",
        "is missing"
      )
      rejects(
        edits({ type: "compact_20260112", pause_after_compaction: "no" }),
        "context_management.edits[0].pause_after_compaction"
      )
      rejects(body({ context_management: { edits: {} } }), "context_management.edits")
    })
  })
})
