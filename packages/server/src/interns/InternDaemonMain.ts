/**
 * The process an intern's daemon runs in, started by `LocalInternRuntime` with an IPC channel. The first message names
 * the intern and gives its daemon key; the daemon listens on a loopback port and says which. Turns typed at an
 * attached terminal go to the gateway over the channel, and their answers come back the same way. It exits when the
 * channel closes (the gateway stopped, or died) and on SIGTERM.
 */
import type { FromDaemon, ToDaemon } from "./DaemonProtocol.js"
import * as InternDaemon from "./InternDaemon.js"

const send = (message: FromDaemon) => process.send?.(message)

const sinks = new Map<number, InternDaemon.TurnSink>()
let turns = 0

const relay: InternDaemon.ChatRelay = ({ content, sessionId }, sink) => {
  const turn = ++turns
  sinks.set(turn, sink)
  send({ type: "chat", turn, sessionId, content })
  return () => {
    if (sinks.delete(turn)) send({ type: "cancel", turn })
  }
}

const answer = (message: Exclude<ToDaemon, { type: "start" }>) => {
  const sink = sinks.get(message.turn)
  if (sink === undefined) return
  switch (message.type) {
    case "delta":
      return sink.delta(message.content)
    case "done":
      sinks.delete(message.turn)
      return sink.done(message.sessionId, message.usage)
    case "error":
      sinks.delete(message.turn)
      return sink.error(message.message, message.reason)
  }
}

process.on("message", (message: ToDaemon) => {
  if (message.type !== "start") return answer(message)
  const { close, server } = InternDaemon.make({
    internId: message.internId,
    key: Buffer.from(message.key, "base64"),
    relay
  })
  server.listen(0, message.host, () => {
    const address = server.address()
    if (address !== null && typeof address === "object") send({ type: "listening", port: address.port })
  })
  process.once("SIGTERM", () => close().then(() => process.exit(0)))
})

process.on("disconnect", () => process.exit(0))
