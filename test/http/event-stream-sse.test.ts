/** The held-open event stream's framing: a first comment at once, then frames, with a comment heartbeat every 15 s. */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Stream, TestClock } from "effect"
import { liveSseResponse } from "../../src/http/Sse.ts"

const bodyText = (response: ReturnType<typeof liveSseResponse>) => {
  const body = response.body
  if (body._tag !== "Stream") throw new Error(`not a stream body: ${body._tag}`)
  return body.stream.pipe(Stream.decodeText())
}

describe("live SSE response", () => {
  it.effect("comments at once, then a keepalive comment every 15 seconds between frames (test clock)", () =>
    Effect.gen(function*() {
      const frames = Stream.concat(Stream.make("id: a\nevent: x\ndata: {}\n\n"), Stream.never)
      const response = liveSseResponse(frames)
      expect(response.headers["content-type"] ?? response.body.contentType).toBe("text/event-stream")
      const collected = yield* Effect.fork(Stream.runCollect(Stream.take(bodyText(response), 4)))
      yield* TestClock.adjust("14 seconds")
      yield* TestClock.adjust("1 second") // 15 s: the first keepalive
      yield* TestClock.adjust("15 seconds") // 30 s: the second
      const parts = Chunk.toReadonlyArray(yield* Fiber.join(collected))
      expect(parts).toEqual([": connected\n\n", "id: a\nevent: x\ndata: {}\n\n", ": keepalive\n\n", ": keepalive\n\n"])
    }))

  it.effect("ends when its frames end", () =>
    Effect.gen(function*() {
      const parts = yield* Stream.runCollect(bodyText(liveSseResponse(Stream.make("id: 1\nevent: e\ndata: 1\n\n"))))
      expect(Chunk.toReadonlyArray(parts)).toEqual([": connected\n\n", "id: 1\nevent: e\ndata: 1\n\n"])
    }))
})

