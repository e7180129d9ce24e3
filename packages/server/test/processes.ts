/** Runs the gateway server as a real process (`packages/server/dist/bundle/model-gateway.js`, built by `npm test`). */
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll } from "vitest"

/** What `npm start` and the `model-gateway` bin run: the bundled server (packages/server/scripts/bundle.mjs). */
export const MAIN = fileURLToPath(new URL("../dist/bundle/model-gateway.js", import.meta.url))

export interface Proc {
  readonly child: ChildProcess
  output: string
  readonly exited: Promise<number | null>
}

/**
 * The processes a test file started that have not exited, killed when the file's tests are over: a test that fails
 * before it stops its server would otherwise leave the server running after the whole run.
 */
const running = new Set<ChildProcess>()
afterAll(() => {
  for (const child of running) child.kill("SIGKILL")
})

export const run = (env: Record<string, string>, cwd: string, args: ReadonlyArray<string> = []): Proc => {
  const child = spawn(process.execPath, [MAIN, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  running.add(child)
  child.on("exit", () => running.delete(child))
  const proc: Proc = {
    child,
    output: "",
    exited: new Promise((resolve) => child.on("exit", (code) => resolve(code)))
  }
  child.stdout!.on("data", (d) => (proc.output += d))
  child.stderr!.on("data", (d) => (proc.output += d))
  return proc
}

/**
 * Waits until the output has a match of `pattern` (whose first group is returned). A pattern must match only a whole
 * line's worth: the output arrives in chunks, and a chunk may end in the middle of a URL or a key.
 */
export const printed = async (proc: Proc, pattern: RegExp, what: string, timeoutMs = 15_000): Promise<string> => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const match = pattern.exec(proc.output)
    if (match) return match[1]
    if (proc.child.exitCode !== null) throw new Error(`server exited: ${proc.output}`)
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`server did not print ${what}: ${proc.output}`)
}

/** Runs a `model-gateway` command to its end; its exit code and output. */
export const command = async (env: Record<string, string>, cwd: string, args: ReadonlyArray<string>) => {
  const proc = run(env, cwd, args)
  const code = await proc.exited
  return { code, output: proc.output }
}

export const listening = (proc: Proc, timeoutMs?: number): Promise<string> =>
  printed(proc, /listening on (http:\/\/[\d.:]+)[/\s]/, "that it is listening", timeoutMs)
