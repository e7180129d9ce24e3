/** A fixed-capacity FIFO that overwrites its oldest element when full. */
export class RingBuffer<A> {
  private readonly items: Array<A | undefined>
  private head = 0
  private count = 0

  constructor(readonly capacity: number) {
    this.items = new Array(capacity)
  }

  get size(): number {
    return this.count
  }

  /** Appends; returns true when the oldest element was dropped to make room. */
  push(item: A): boolean {
    const tail = (this.head + this.count) % this.capacity
    this.items[tail] = item
    if (this.count < this.capacity) {
      this.count++
      return false
    }
    this.head = (this.head + 1) % this.capacity
    return true
  }

  /** Removes and returns up to `n` of the oldest elements. */
  take(n: number): Array<A> {
    const taken = Math.min(n, this.count)
    const out = new Array<A>(taken)
    for (let i = 0; i < taken; i++) {
      const index = (this.head + i) % this.capacity
      out[i] = this.items[index] as A
      this.items[index] = undefined
    }
    this.head = (this.head + taken) % this.capacity
    this.count -= taken
    return out
  }

  /** The element `i` places from the newest (0 = newest). */
  fromNewest(i: number): A {
    return this.items[(this.head + this.count - 1 - i) % this.capacity] as A
  }

  /** The oldest element, if any. */
  peekOldest(): A | undefined {
    return this.count === 0 ? undefined : this.items[this.head]
  }
}
