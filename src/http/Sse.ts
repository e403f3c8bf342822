/**
 * Server-sent events. Finite batches (reference §8): the client reconnects with `Last-Event-ID`; operations return
 * every event after N, processes at most 100 events and 1 MiB of frames per batch. And one held-open stream, the
 * project event stream (`liveSseResponse`), with a comment line as heartbeat.
 */
import { HttpServerResponse } from "@effect/platform"
import { Schedule, Stream } from "effect"
import type { OperationEventRow } from "../db/repos/Operations.ts"
import type { ProcessEventRow } from "../db/repos/Processes.ts"

export const PROCESS_BATCH_EVENTS = 100
export const PROCESS_BATCH_BYTES = 1024 * 1024

export interface SseEvent {
  readonly id: number
  readonly event: string
  readonly data: unknown
}

export const sseFrame = (e: { readonly id: number | string; readonly event: string; readonly data: unknown }) => `id: ${e.id}\nevent: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`

/** Frames in order, stopping before the frame that would exceed `maxBytes` (always at least one). */
export const sseBody = (events: ReadonlyArray<SseEvent>, maxBytes = Number.POSITIVE_INFINITY): string => {
  let body = ""
  let bytes = 0
  for (const event of events) {
    const frame = sseFrame(event)
    const size = Buffer.byteLength(frame)
    if (body !== "" && bytes + size > maxBytes) break
    body += frame
    bytes += size
  }
  return body
}

export const operationEventFrame = (operationId: string) => (r: OperationEventRow): SseEvent => ({
  id: r.seq,
  event: r.type,
  data: { sequence: r.seq, operation_id: operationId, type: r.type, occurred_at: r.occurred_at, data: r.data }
})

export const processEventFrame = (processId: string) => (r: ProcessEventRow): SseEvent => ({
  id: r.seq,
  event: r.type,
  data: { sequence: r.seq, process_id: processId, type: r.type, occurred_at: r.occurred_at, data: r.data }
})

export const sseResponse = (body: string) =>
  HttpServerResponse.text(body, { contentType: "text/event-stream", headers: { "cache-control": "no-store" } })

export const HEARTBEAT_EVERY = "15 seconds"

/**
 * A held-open event stream: a first comment line at once (so the client knows it is connected), then the given
 * frames, with a `: keepalive` comment every 15 s between them. Ends when the frames end.
 */
export const liveSseResponse = <E>(frames: Stream.Stream<string, E>) =>
  HttpServerResponse.stream(
    Stream.concat(
      Stream.make(": connected\n\n"),
      Stream.merge(frames, Stream.fromSchedule(Schedule.spaced(HEARTBEAT_EVERY)).pipe(Stream.as(": keepalive\n\n")), { haltStrategy: "left" })
    ).pipe(Stream.encodeText),
    { contentType: "text/event-stream", headers: { "cache-control": "no-store", "x-accel-buffering": "no" } }
  )
