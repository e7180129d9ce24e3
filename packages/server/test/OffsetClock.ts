/** The real clock, shifted by an offset a test controls: cooldowns, Retry-After holds and outage windows pass at once. */
import { Clock, type Duration, Effect } from "effect"

export class OffsetClock implements Clock.Clock {
  readonly [Clock.ClockTypeId]: Clock.ClockTypeId = Clock.ClockTypeId
  offset = 0
  private readonly real = Clock.make()
  unsafeCurrentTimeMillis() {
    return this.real.unsafeCurrentTimeMillis() + this.offset
  }
  get currentTimeMillis() {
    return Effect.sync(() => this.unsafeCurrentTimeMillis())
  }
  unsafeCurrentTimeNanos() {
    return this.real.unsafeCurrentTimeNanos() + BigInt(this.offset) * 1_000_000n
  }
  get currentTimeNanos() {
    return Effect.sync(() => this.unsafeCurrentTimeNanos())
  }
  sleep(duration: Duration.Duration) {
    return this.real.sleep(duration)
  }
}
