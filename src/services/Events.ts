/**
 * The durable event log (reference/openmetal-api.md §8). Call `appendEvent` inside the same transaction as the
 * state change it records: the event, its webhook deliveries and their jobs (webhooks/FanOut.ts) commit with the
 * change or not at all. (It opens a transaction of its own when called outside one.) The live feed
 * (EventFeed.ts) sees it once committed, wakes the runner for the deliveries and tells the event streams.
 */
import { Effect } from "effect"
import { inTransaction } from "../db/Db.ts"
import { EventsRepo, type NewEvent } from "../db/repos/Events.ts"
import { fanOut } from "./webhooks/FanOut.ts"

export type { NewEvent }

export const appendEvent = (event: NewEvent) =>
  inTransaction(Effect.gen(function*() {
    const row = yield* EventsRepo.append(event)
    yield* fanOut(row)
    return row
  }))
