interface Node<V> {
  readonly key: string
  value: V
  prev: Node<V> | undefined
  next: Node<V> | undefined
}

/**
 * A map ordered by the last `set`, with O(1) access to the oldest entry. A linked list rather than
 * a `Map`'s insertion order: V8 leaves deleted entries in place until it rehashes, so repeatedly
 * deleting a `Map`'s first entry and asking for the new first one costs time proportional to the
 * deletions so far.
 */
export class LruMap<V> {
  private readonly nodes = new Map<string, Node<V>>()
  private head: Node<V> | undefined = undefined
  private tail: Node<V> | undefined = undefined

  get size(): number {
    return this.nodes.size
  }

  get(key: string): V | undefined {
    return this.nodes.get(key)?.value
  }

  /** Sets the value and makes the entry the newest. */
  set(key: string, value: V): void {
    let node = this.nodes.get(key)
    if (node !== undefined) {
      this.unlink(node)
      node.value = value
    } else {
      node = { key, value, prev: undefined, next: undefined }
      this.nodes.set(key, node)
    }
    node.prev = this.tail
    if (this.tail !== undefined) this.tail.next = node
    this.tail = node
    if (this.head === undefined) this.head = node
  }

  delete(key: string): boolean {
    const node = this.nodes.get(key)
    if (node === undefined) return false
    this.unlink(node)
    this.nodes.delete(key)
    return true
  }

  /** The entry set the longest ago. */
  oldest(): { readonly key: string; readonly value: V } | undefined {
    return this.head
  }

  private unlink(node: Node<V>): void {
    if (node.prev !== undefined) node.prev.next = node.next
    else this.head = node.next
    if (node.next !== undefined) node.next.prev = node.prev
    else this.tail = node.prev
    node.prev = undefined
    node.next = undefined
  }
}
