/**
 * Rows for multi-row statements, cut into chunks whose sizes come from a fixed set (256, 64, 16, 4, 1).
 *
 * Why: a multi-row `INSERT` has one SQL text per number of rows, and the SQLite client keeps a prepared statement per
 * text (up to 200, for 10 minutes). Batches of every size from 1 to 500 grew the process by hundreds of prepared
 * statements, each holding its text and SQLite's compiled program: RSS climbed for ten minutes under steady load
 * (docs/benchmarks.md, growth probe). With fixed sizes a table has at most five texts; a batch of n rows is at most
 * `n / 256 + 3 + 3 + 3 + 3` statements, in the same transaction.
 */
const SIZES = [256, 64, 16, 4, 1] as const

/** `items` in order, cut into chunks of 256, 64, 16, 4 and 1 items (largest first), none larger than `max`. */
export const fixedChunks = <A>(items: ReadonlyArray<A>, max = 256): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  let i = 0
  for (const size of SIZES) {
    if (size > max) continue
    while (items.length - i >= size) {
      out.push(items.slice(i, i + size))
      i += size
    }
  }
  return out
}
