/**
 * The durable event log (reference/openmetal-api.md §8). Call `appendEvent` inside the same transaction as the
 * state change it records: the event, its webhook deliveries and their jobs (webhooks/FanOut.ts) commit with the
 * change or not at all. (It opens a transaction of its own when called outside one.) The live feed
 * (EventFeed.ts) sees it once committed, wakes the runner for the deliveries and tells the event streams.
 */
import { Chunk, Effect, Queue, Stream } from "effect"
import { inTransaction } from "../db/Db.ts"
import { EventsRepo, type NewEvent } from "../db/repos/Events.ts"
import { EventFeed } from "./EventFeed.ts"
import { fanOut } from "./webhooks/FanOut.ts"
import type { ProjectId } from "../domain/Ids.ts"

export type { NewEvent }

export const appendEvent = (event: NewEvent) =>
  inTransaction(Effect.gen(function*() {
    const { event: row, webhooks } = yield* EventsRepo.append(event)
    yield* fanOut(row, webhooks)
    return row
  }))

/** A project's events after `afterSeq` (its sequence number in the log), oldest first, at most `limit`. */
export const projectEvents = (projectId: ProjectId, afterSeq: number, limit: number) => EventsRepo.ofProject(projectId, afterSeq, limit)

/**
 * A project's events after `afterSeq`, as they come: what the log holds now, then more each time the feed
 * signals new events of the project (a stream that needs nothing more from its reader's context). Each read
 * starts after the last event given, so nothing comes twice and a coalesced signal loses nothing.
 */
export const followProjectEvents = (projectId: ProjectId, afterSeq: number, batch: number) =>
  Effect.gen(function*() {
    const events = yield* EventsRepo
    const feed = yield* EventFeed
    return Stream.unwrapScoped(Effect.gen(function*() {
      const signal = yield* feed.watch(projectId)
      let sent = afterSeq
      const next = Effect.gen(function*() {
        while (true) {
          const rows = yield* events.ofProject(projectId, sent, batch)
          const last = rows[rows.length - 1]
          if (last !== undefined) {
            sent = last.seq
            return Chunk.fromIterable(rows)
          }
          yield* Queue.take(signal)
        }
      })
      return Stream.repeatEffectChunk(next)
    }))
  })

/** Where a stream that names no start begins: after what is committed now. */
export const lastEventSeq = Effect.flatMap(EventFeed, (feed) => feed.lastSeq)
