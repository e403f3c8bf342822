/**
 * The durable event log (reference/openmetal-api.md §8). Call `appendEvent` inside the same transaction as the
 * state change it records; webhook fan-out reads from this log.
 */
import { EventsRepo, type NewEvent } from "../db/repos/Events.ts"

export type { NewEvent }

export const appendEvent = (event: NewEvent) => EventsRepo.append(event)
