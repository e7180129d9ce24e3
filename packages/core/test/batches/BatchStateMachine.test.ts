import { assert, describe, it } from "@effect/vitest"
import { Batch, BatchStateMachine } from "@model-gateway/core"
import { Either } from "effect"

type Status = Batch.BatchStatus
type Event = BatchStateMachine.BatchEvent

/** Every legal move, written out: any pair not here must be rejected. */
const legal: Record<Status, Partial<Record<Event, Status>>> = {
  validating: { start: "in_progress", fail: "failed", expire: "expired", cancel: "cancelling" },
  in_progress: { finalize: "finalizing", fail: "failed", expire: "expired", cancel: "cancelling" },
  finalizing: { complete: "completed", fail: "failed" },
  cancelling: { cancelled: "cancelled" },
  completed: {},
  failed: {},
  expired: {},
  cancelled: {}
}

describe("BatchStateMachine", () => {
  it("covers every status of the interface", () => {
    assert.deepStrictEqual([...Batch.statuses].sort(), Object.keys(legal).sort())
    assert.deepStrictEqual([...Batch.terminalStatuses].sort(), ["cancelled", "completed", "expired", "failed"])
    assert.deepStrictEqual(
      [...Batch.activeStatuses, ...Batch.terminalStatuses].sort(),
      [...Batch.statuses].sort()
    )
  })

  for (const from of Batch.statuses) {
    for (const event of BatchStateMachine.events) {
      const to = legal[from][event]
      it(`${from} + ${event} → ${to ?? "rejected"}`, () => {
        const result = BatchStateMachine.transition(from, event)
        if (to === undefined) {
          assert.isTrue(Either.isLeft(result))
          if (Either.isLeft(result)) {
            assert.strictEqual(result.left.message, `a batch that is ${from.replace("_", " ")} cannot take '${event}'`)
          }
        } else {
          assert.deepStrictEqual(result, Either.right(to))
        }
      })
    }
  }

  it("terminal statuses accept nothing; the others accept what the table says", () => {
    for (const status of Batch.statuses) {
      assert.deepStrictEqual(
        [...BatchStateMachine.accepted(status)].sort(),
        Object.keys(legal[status]).sort()
      )
      assert.strictEqual(Batch.isTerminal(status), BatchStateMachine.accepted(status).length === 0)
    }
  })
})
