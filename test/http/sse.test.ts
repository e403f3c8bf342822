/** The held-open event stream (`?follow=true`) on its own: order, wake-ups, heartbeats and the end. */
import { Effect, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { nextSignal, notify } from "../../src/services/Signals.ts"
import { followStream, type SseEvent } from "../../src/http/Sse.ts"

const text = (chunks: Iterable<Uint8Array>) => [...chunks].map((c) => new TextDecoder().decode(c)).join("")

describe("followStream", () => {
  it("sends stored events after the cursor as a signal wakes it, a heartbeat when quiet, and ends once finished with nothing left", async () => {
    const stored: Array<SseEvent> = [{ id: 1, event: "queued", data: {} }]
    let finished = false
    const stream = followStream({
      after: 0,
      read: (after) => Effect.sync(() => stored.filter((e) => e.id > after)),
      finished: Effect.sync(() => finished),
      signal: (ms) => nextSignal("test:follow", ms),
      heartbeatMs: 50
    })
    const writer = Effect.gen(function*() {
      yield* Effect.sleep("120 millis") // quiet: at least one heartbeat first
      stored.push({ id: 2, event: "stdout", data: { n: 2 } })
      yield* notify("test:follow")
      yield* Effect.sleep("20 millis")
      stored.push({ id: 3, event: "exited", data: {} })
      finished = true
      yield* notify("test:follow")
    })
    const [chunks] = await Effect.runPromise(Effect.all([Stream.runCollect(stream), writer], { concurrency: 2 }))
    const body = text(chunks)
    expect(body.indexOf("event: queued")).toBeLessThan(body.indexOf(": heartbeat"))
    expect(body.indexOf(": heartbeat")).toBeLessThan(body.indexOf("event: stdout"))
    expect(body.indexOf("event: stdout")).toBeLessThan(body.indexOf("event: exited"))
    expect(body.match(/^id: /gm)).toHaveLength(3)
  })

  it("ends at once when the resource has finished and every event was sent before", async () => {
    const chunks = await Effect.runPromise(Stream.runCollect(followStream({
      after: 3,
      read: () => Effect.succeed([]),
      finished: Effect.succeed(true),
      signal: () => Effect.never
    })))
    expect(text(chunks)).toBe("")
  })
})
