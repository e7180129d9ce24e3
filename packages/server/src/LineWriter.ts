/**
 * Log lines written in batches: a line is appended to a buffer, and the buffer goes to the stream once per turn of the
 * event loop (or as soon as it holds 64 KiB), in one write. One `write` per line costs a system call per request; a
 * process at thousands of requests per second spends more on that than on the request. Whatever is buffered is
 * written when the process exits.
 */

export interface LineWriter {
  /** Appends one line (without its newline). */
  readonly write: (line: string) => void
  /** Writes what is buffered now. */
  readonly flush: () => void
}

const FLUSH_BYTES = 64 * 1024

/** A batched writer to a stream (stdout by default). */
export const make = (stream: NodeJS.WritableStream = process.stdout): LineWriter => {
  let buffer = ""
  let scheduled = false
  const flush = () => {
    scheduled = false
    if (buffer === "") return
    const text = buffer
    buffer = ""
    stream.write(text)
  }
  process.once("exit", flush)
  return {
    write: (line) => {
      buffer += line + "\n"
      if (buffer.length >= FLUSH_BYTES) flush()
      else if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    },
    flush
  }
}

/** The process's standard output, batched: the one writer every logger of the process shares. */
export const stdout: LineWriter = make()
