import { assert, describe, it } from "@effect/vitest"
import { Intern, InternStateMachine } from "@model-gateway/core"
import { Either } from "effect"

type Status = Intern.InternStatus
type Event = InternStateMachine.InternEvent

/** Every legal move, written out: any pair not here must be rejected. */
const legal: Record<Status, Partial<Record<Event, InternStateMachine.Target>>> = {
  queued: { provision: "provisioning", destroy: "destroying", update: "queued" },
  provisioning: {
    provisioned: "running",
    provision_failed: "failed",
    suspend: "stopped",
    suspend_failed: "failed",
    destroy: "destroying",
    update: "provisioning"
  },
  running: { suspend: "stopped", suspend_failed: "failed", lost: "failed", destroy: "destroying", update: "running" },
  failed: { provision: "provisioning", destroy: "destroying", update: "failed" },
  stopped: { provision: "provisioning", destroy: "destroying", update: "stopped" },
  destroying: { destroyed: "removed", destroy_failed: "destroy_failed" },
  destroy_failed: { destroy: "destroying", update: "destroy_failed" }
}

describe("InternStateMachine", () => {
  it("covers every status and event of the interface", () => {
    assert.deepStrictEqual([...Intern.statuses].sort(), Object.keys(legal).sort())
    assert.deepStrictEqual(Intern.statuses, [
      "queued",
      "provisioning",
      "running",
      "failed",
      "stopped",
      "destroying",
      "destroy_failed"
    ])
  })

  for (const from of Intern.statuses) {
    for (const event of InternStateMachine.events) {
      const expected = legal[from][event]
      it(`${from} + ${event} → ${expected ?? "rejected"}`, () => {
        const result = InternStateMachine.transition(from, event)
        if (expected === undefined) {
          assert.isTrue(Either.isLeft(result))
          const error = (result as Either.Left<InternStateMachine.IllegalTransition, never>).left
          assert.strictEqual(error._tag, "IllegalTransition")
          assert.deepStrictEqual([error.from, error.event], [from, event])
          assert.include(error.message, event)
        } else {
          assert.deepStrictEqual(result, Either.right(expected))
        }
      })
    }
  }

  it("lists the events each status accepts", () => {
    for (const from of Intern.statuses) {
      assert.deepStrictEqual(InternStateMachine.accepted(from), Object.keys(legal[from]) as Array<Event>)
    }
  })

  it("only ever leaves a running daemon through suspend, its failure, its loss or destroy", () => {
    const exits = InternStateMachine.accepted("running").filter((e) => e !== "update")
    assert.deepStrictEqual(exits, ["suspend", "suspend_failed", "lost", "destroy"])
  })

  it("reaches running only through provisioning, and removal only through destroying", () => {
    for (const from of Intern.statuses) {
      for (const event of InternStateMachine.events) {
        const to = InternStateMachine.transition(from, event)
        if (Either.isRight(to) && to.right === "running" && from !== "running") assert.strictEqual(from, "provisioning")
        if (Either.isRight(to) && to.right === "removed") assert.strictEqual(from, "destroying")
      }
    }
  })
})
