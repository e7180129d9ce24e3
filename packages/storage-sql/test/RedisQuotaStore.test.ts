import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer } from "effect"
import { Redis } from "ioredis"
import { afterAll } from "vitest"
import { quotaStoreContract } from "../../core/test/contract/QuotaStoreContract.js"
import { redisPrefix, redisUp, redisUrl, skipRedis } from "../../core/test/contract/Redis.js"
import { RedisQuotaStore } from "../src/index.js"

const skip = skipRedis("the Redis quota store tests")
const prefix = redisPrefix()

afterAll(async () => {
  if (skip || !redisUp) return
  const client = new Redis(redisUrl)
  const keys = await client.keys(`${prefix}*`)
  if (keys.length > 0) await client.del(...keys)
  await client.quit()
})

describe.skipIf(skip)("Redis", () => {
  quotaStoreContract("Redis", RedisQuotaStore.layer({ url: redisUrl, prefix }))

  it.effect("a Redis that cannot be reached fails the layer with a message naming it, never a password", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(
        Effect.scoped(Layer.build(RedisQuotaStore.layer({ url: "redis://user:s3cret@127.0.0.1:1", prefix })))
      )
      assert.isTrue(Exit.isFailure(exit))
      const text = String(Exit.isFailure(exit) ? exit.cause : "")
      assert.include(text, "cannot reach Redis at 127.0.0.1:1")
      assert.notInclude(text, "s3cret")
    }))
})
