#!/usr/bin/env node
/**
 * `intern-terminal <intern id> [--session <id>]`: chat with an intern from a terminal. Reads `GATEWAY_URL` (default
 * `http://127.0.0.1:8080/v1`) and `GATEWAY_API_KEY` (a key of the intern's workspace, in the interns programme), asks
 * the gateway for the daemon's access, attaches, then sends each line typed on standard input and prints the intern's
 * answer as it streams. Ends with standard input (after the last answer).
 */
import { createInterface } from "node:readline"
import { attach, daemonAccess, type DaemonLine, TerminalError } from "./TerminalClient.js"

const fail = (message: string): never => {
  process.stderr.write(`intern-terminal: ${message}\n`)
  process.exit(1)
}

const args = process.argv.slice(2)
const internId = args.find((a, i) => !a.startsWith("--") && args[i - 1] !== "--session")
const sessionAt = args.indexOf("--session")
const sessionId = sessionAt >= 0 ? args[sessionAt + 1] : undefined
const gateway = process.env.GATEWAY_URL ?? "http://127.0.0.1:8080/v1"
const apiKey = process.env.GATEWAY_API_KEY ?? fail("set GATEWAY_API_KEY to a key of the intern's workspace")
if (internId === undefined) fail("usage: intern-terminal <intern id> [--session <id>]")

const run = async () => {
  const access = await daemonAccess(gateway, apiKey, internId!)
  const terminal = await attach(access, sessionId)
  const lines = terminal.lines[Symbol.asyncIterator]()
  const next = async (): Promise<DaemonLine | undefined> => (await lines.next()).value
  const ready = await next()
  if (ready?.type === "ready") process.stderr.write(`attached to ${ready.intern} at ${access.origin}\n`)
  for await (const input of createInterface({ input: process.stdin, terminal: false })) {
    if (input.trim() === "") continue
    terminal.send(input)
    for (;;) {
      const line = await next()
      if (line === undefined) return fail("the daemon closed the connection")
      if (line.type === "delta") process.stdout.write(line.content)
      else if (line.type === "done") {
        process.stdout.write("\n")
        process.stderr.write(`(session ${line.session_id})\n`)
        break
      } else if (line.type === "error") {
        process.stderr.write(`error (${line.reason}): ${line.message}\n`)
        break
      }
    }
  }
  terminal.close()
}

run().catch((error: unknown) =>
  fail(error instanceof TerminalError ? error.message : error instanceof Error ? error.message : String(error))
)
