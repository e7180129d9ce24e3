// What Effect's Stream machinery costs per element when every element arrives on its own (one SSE event per network
// read, as in the benchmark's streams), for the shapes the gateway uses. No sockets: a source whose every pull waits
// for a setImmediate, 26 elements per stream, 32 streams at a time.
//
//   node bench/stream-pipeline.mjs
//
// - source: `Stream.repeatEffectChunkOption(pull)` (what Transport.ts used, and MessagesService.ts for the rest of a
//   committed stream) against a channel that loops (`fromPull`, which Transport.ts had until streams became pulls).
//
// This measured the Stream shapes the gateway had. It no longer uses any on the node path: streams travel as pulls
// (see "Streams: pulls instead of streams" in docs/benchmarks.md), which this file does not measure.
// - sink: `Stream.runForEachChunk` against `Stream.toPull` and a loop of Effects (`writeStream` in NodeBinding.ts).
// - "executor-like": MessagesService's shape between the two: toPull of the upstream stream, then
//   `concat(fromIterable(held), repeatEffectChunkOption(pull))`, `map`, `catchAll`, `concat`, `ensuring`; and the same
//   with the rest of the pull as a channel that loops.
import { Channel, Chunk, Effect, Exit, Option, Scope, Stream } from "effect"

const EVENTS = 26
const STREAMS = 2_048
const AT_ONCE = 32

const next = (i) => Effect.async((resume) => {
  setImmediate(() => resume(Effect.succeed(Chunk.of({ type: "content_block_delta", index: i }))))
})

const repeatSource = () => {
  let i = 0
  return Stream.repeatEffectChunkOption(Effect.suspend(() => (i >= EVENTS ? Effect.fail(Option.none()) : next(i++))))
}

const channelSource = () => {
  let i = 0
  const pull = Effect.suspend(() => (i >= EVENTS ? Effect.succeed(undefined) : next(i++)))
  const loop = Channel.flatMap(
    Channel.fromEffect(pull),
    (chunk) => (chunk === undefined ? Channel.void : Channel.zipRight(Channel.write(chunk), loop))
  )
  return Stream.fromChannel(loop)
}

// The rest of a toPull'ed stream as a channel that loops, instead of `Stream.repeatEffectChunkOption(pull)`.
const restOf = (pull) => {
  const loop = Channel.flatMap(
    Channel.fromEffect(Effect.catchAll(pull, (e) => (Option.isNone(e) ? Effect.succeed(undefined) : Effect.fail(e.value)))),
    (chunk) => (chunk === undefined ? Channel.void : Channel.zipRight(Channel.write(chunk), loop))
  )
  return Stream.fromChannel(loop)
}

const executorLike = (source, rest = Stream.repeatEffectChunkOption) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const pull = yield* Scope.extend(Stream.toPull(source), scope)
    const held = yield* pull
    return Stream.concat(Stream.fromIterable(held), rest(pull)).pipe(
      Stream.map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`),
      Stream.catchAll(() => Stream.succeed("event: error\n\n")),
      Stream.concat(Stream.suspend(() => Stream.empty)),
      Stream.ensuring(Scope.close(scope, Exit.void))
    )
  })

const runForEachChunk = (stream) => Stream.runForEachChunk(stream, () => Effect.void)

const pullLoop = (stream) =>
  Effect.scoped(Effect.flatMap(Stream.toPull(stream), (pull) => {
    const loop = Effect.matchEffect(pull, {
      onFailure: (e) => (Option.isNone(e) ? Effect.void : Effect.fail(e.value)),
      onSuccess: () => loop
    })
    return loop
  }))

const measure = async (name, makeRun) => {
  let best = Infinity
  for (let round = 0; round < 4; round++) {
    const before = process.cpuUsage()
    for (let s = 0; s < STREAMS; s += AT_ONCE) {
      await Promise.all(Array.from({ length: AT_ONCE }, () => Effect.runPromise(makeRun())))
    }
    const used = process.cpuUsage(before)
    if (round > 0) best = Math.min(best, (used.user + used.system) / STREAMS / EVENTS)
  }
  console.log(`  ${name.padEnd(64)} ${best.toFixed(1).padStart(5)} µs/element`)
}

console.log(`node ${process.version}: CPU per element, best of 3 rounds of ${STREAMS} streams of ${EVENTS} elements`)
await measure("repeatEffectChunkOption source, runForEachChunk", () => runForEachChunk(repeatSource()))
await measure("repeatEffectChunkOption source, toPull loop", () => pullLoop(repeatSource()))
await measure("channel source, runForEachChunk", () => runForEachChunk(channelSource()))
await measure("channel source, toPull loop", () => pullLoop(channelSource()))
await measure("channel source, executor-like, runForEachChunk", () => Effect.flatMap(executorLike(channelSource()), runForEachChunk))
await measure("channel source, executor-like, toPull loop", () => Effect.flatMap(executorLike(channelSource()), pullLoop))
await measure(
  "channel source, executor-like with a channel rest, toPull loop",
  () => Effect.flatMap(executorLike(channelSource(), restOf), pullLoop)
)
process.exit(0)
