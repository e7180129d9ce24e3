/** The per-request line: the same text Effect's loggers write for it, built directly. */
import { Logger } from "effect"
import { describe, expect, it } from "vitest"
import { usageRecord } from "../../core/test/contract/StorageContract.js"
import * as RequestLog from "../src/RequestLog.js"

const records = [
  usageRecord({ requestId: "req_1", keyId: "0123456789ab", workspace: "team a", stream: true }),
  usageRecord({
    keyId: null,
    workspace: null,
    model: null,
    provider: null,
    status: 401,
    errorType: "authentication_error"
  }),
  usageRecord({ workspace: "quote\"and=equals", route: "GET /v1/models/{id}" })
]
const date = new Date("2026-11-23T20:00:00.123Z")

describe("RequestLog.formatLine", () => {
  it.each(records.map((r, i) => [i, r] as const))("record %i: exactly Effect's logfmt and JSON lines", (_i, r) => {
    const entry = RequestLog.entryOf(r, date)
    expect(RequestLog.formatLine("logfmt", r, date)).toBe(Logger.logfmtLogger.log(entry))
    expect(RequestLog.formatLine("json", r, date)).toBe(Logger.jsonLogger.log(entry))
  })

  it("describes the request in one readable message, never naming a key", () => {
    expect(RequestLog.describe(records[0])).toBe(
      "POST /v1/messages 200 anthropic/claude-sonnet-4 via anthropic attempts=2 tokens=1234+89r+10w/567 " +
        "cost=0.000123456789 1543ms"
    )
    expect(RequestLog.describe(records[1])).toBe(
      "POST /v1/messages 401 authentication_error attempts=2 tokens=1234+89r+10w/567 cost=0.000123456789 1543ms"
    )
  })
})
