import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import * as ModelPatterns from "../../src/plugins/ModelPatterns.js"

const ids = ["openai/gpt-5", "openai/gpt-5-mini", "anthropic/claude-sonnet", "anthropic/claude-haiku", "x/mini"]

/** A reference implementation: `*` as `.*`, everything else literal, ASCII case ignored. */
const reference = (pattern: string, id: string): boolean =>
  new RegExp(`^${pattern.split("*").map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`, "is")
    .test(id)

const idChar = fc.constantFrom("a", "b", "B", "/", "-", ".")
const id = fc.string({ unit: idChar, maxLength: 8 })
const pattern = fc.string({ unit: fc.constantFrom("a", "b", "A", "/", "-", ".", "*"), maxLength: 6 })

describe("ModelPatterns", () => {
  it("matches exact ids, vendor/*, *, suffix and infix globs", () => {
    expect(ModelPatterns.filterModels(ids, ["openai/*"])).toEqual(["openai/gpt-5", "openai/gpt-5-mini"])
    expect(ModelPatterns.filterModels(ids, ["*"])).toEqual(ids)
    expect(ModelPatterns.filterModels(ids, ["*-mini"])).toEqual(["openai/gpt-5-mini"])
    expect(ModelPatterns.filterModels(ids, ["*mini"])).toEqual(["openai/gpt-5-mini", "x/mini"])
    expect(ModelPatterns.filterModels(ids, ["anthropic/*-haiku"])).toEqual(["anthropic/claude-haiku"])
    expect(ModelPatterns.filterModels(ids, ["*claude*"])).toEqual(["anthropic/claude-sonnet", "anthropic/claude-haiku"])
    expect(ModelPatterns.filterModels(ids, ["OpenAI/GPT-5"])).toEqual(["openai/gpt-5"])
    expect(ModelPatterns.filterModels(ids, ["openai/gpt"])).toEqual([])
    expect(ModelPatterns.matches("a*a", "a")).toBe(false)
    expect(ModelPatterns.matches("a*a", "aa")).toBe(true)
  })

  it("treats an absent or empty allow list as allowing every model", () => {
    expect(ModelPatterns.filterModels(ids)).toEqual(ids)
    expect(ModelPatterns.filterModels(ids, [])).toEqual(ids)
    expect(ModelPatterns.filterModels(ids, undefined, ["anthropic/*", "x/mini"])).toEqual([
      "openai/gpt-5",
      "openai/gpt-5-mini"
    ])
  })

  it("reports what each filter removed", () => {
    expect(ModelPatterns.partitionModels(ids, ["openai/*", "x/*"], ["*mini"])).toEqual({
      kept: ["openai/gpt-5"],
      notAllowed: ["anthropic/claude-sonnet", "anthropic/claude-haiku"],
      excluded: ["openai/gpt-5-mini", "x/mini"]
    })
  })

  it("agrees with a regular-expression reference", () => {
    fc.assert(fc.property(pattern, id, (p, s) => ModelPatterns.matches(p, s) === reference(p, s)), { numRuns: 2000 })
  })

  it("exclusion always beats allowance", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(id, { maxLength: 12 }),
        fc.option(fc.array(pattern, { maxLength: 4 }), { nil: undefined }),
        fc.array(pattern, { maxLength: 4 }),
        fc.array(fc.nat(), { maxLength: 3 }),
        (models, allowed, excluded, picks) => {
          // exclude some ids explicitly, and allow them too, so that both lists name them
          const named = models.length === 0 ? [] : picks.map((i) => models[i % models.length])
          const allow = allowed === undefined ? undefined : [...allowed, ...named]
          const exclude = [...excluded, ...named]
          const kept = ModelPatterns.filterModels(models, allow, exclude)
          const isExcluded = ModelPatterns.compile(exclude)
          for (const k of kept) expect(isExcluded(k)).toBe(false)
          for (const n of named) expect(kept).not.toContain(n)
          const { notAllowed, excluded: removed } = ModelPatterns.partitionModels(models, allow, exclude)
          expect(kept.length + notAllowed.length + removed.length).toBe(models.length)
          for (const m of models) {
            if (!isExcluded(m) && (allow === undefined || allow.length === 0 || ModelPatterns.compile(allow)(m))) {
              expect(kept).toContain(m)
            }
          }
        }
      ),
      { numRuns: 500 }
    )
  })
})
