/**
 * Server-sent events. Finite batches (reference §8): the client reconnects with `Last-Event-ID`; operations return
 * every event after N, processes at most 100 events and 1 MiB of frames per batch. And held-open streams (a
 * resource's `?follow=true`, the project event stream `liveSseBody`), with a comment line as heartbeat, each
 * ended by `whileAllowed` once the credential that opened it may no longer read it.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef, Option, Schedule, Stream } from "effect"
import type { OperationEventRow } from "../db/repos/Operations.ts"
import type { ProcessEventRow } from "../db/repos/Processes.ts"
import { apiError, CurrentRequestId, ServiceUnavailable } from "../domain/Errors.ts"
import { END_REASONS, type EndReason, type LiveStreamsShape, type StreamHolder } from "../services/LiveStreams.ts"
import type { OperationId, ProcessId } from "../domain/Ids.ts"

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

export const operationEventFrame = (operationId: OperationId) => (r: OperationEventRow): SseEvent => ({
  id: r.seq,
  event: r.type,
  data: { sequence: r.seq, operation_id: operationId, type: r.type, occurred_at: r.occurred_at, data: r.data }
})

export const processEventFrame = (processId: ProcessId) => (r: ProcessEventRow): SseEvent => ({
  id: r.seq,
  event: r.type,
  data: { sequence: r.seq, process_id: processId, type: r.type, occurred_at: r.occurred_at, data: r.data }
})

export const sseResponse = (body: string) =>
  HttpServerResponse.text(body, { contentType: "text/event-stream", headers: { "cache-control": "no-store" } })

/** How often a follower looks for new events on its own (a writer in another process does not wake it). */
const FOLLOW_POLL_MS = 1_000
/** A comment line this often keeps proxies and clients from closing a quiet stream. */
export const FOLLOW_HEARTBEAT_MS = 15_000

/** The API listener closes a connection silent this long (Http.ts): twice a followed stream's heartbeat. */
export const IDLE_SECONDS = (2 * FOLLOW_HEARTBEAT_MS) / 1000

/**
 * A request that waits on a sandbox (the raw file routes, standard input) answers its head within this, or 503
 * `sandbox_unresponsive` (retryable): a sandbox that stops its agent (SIGSTOP) would otherwise hold the request
 * until the listener's idle close cut it with no answer at all.
 */
export const SANDBOX_HEAD_MS = (IDLE_SECONDS - 5) * 1000

export const answerWithin = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.timeoutFail(effect, {
    duration: SANDBOX_HEAD_MS,
    onTimeout: () => apiError(ServiceUnavailable, "sandbox_unresponsive", `The sandbox did not answer within ${SANDBOX_HEAD_MS / 1000} s; try again`)
  })

/** Where a follower is: the last event sent, and since when nothing was sent. */
export interface FollowPosition {
  readonly after: number
  readonly quietSince: number
}

/** What a follower does next: send bytes (and move on), end, or wait this long for a signal. */
export type FollowRound =
  | { readonly _tag: "send"; readonly bytes: Uint8Array; readonly next: FollowPosition }
  | { readonly _tag: "end" }
  | { readonly _tag: "wait"; readonly ms: number }

const encoder = new TextEncoder()

/**
 * A follower's round, given whether the resource was over when asked (asked before reading: a resource that
 * finished meanwhile has its last events in this read) and the events stored after its position: send them, else
 * end once over, else a heartbeat when quiet `heartbeatMs`, else wait (at most FOLLOW_POLL_MS). Shared by
 * `followStream` and the fast path of http/FastReads.ts, so both send the same frames.
 */
export const followRound = (at: FollowPosition, over: boolean, events: ReadonlyArray<SseEvent>, heartbeatMs = FOLLOW_HEARTBEAT_MS): FollowRound => {
  if (events.length > 0) return { _tag: "send", bytes: encoder.encode(sseBody(events)), next: { after: events.at(-1)!.id, quietSince: Date.now() } }
  if (over) return { _tag: "end" }
  const quiet = Date.now() - at.quietSince
  if (quiet >= heartbeatMs) return { _tag: "send", bytes: encoder.encode(": heartbeat\n\n"), next: { ...at, quietSince: Date.now() } }
  return { _tag: "wait", ms: Math.min(FOLLOW_POLL_MS, heartbeatMs - quiet) }
}

/**
 * A held-open stream (`?follow=true`): every event after `after` as it is stored, woken by `signal` (Signals.ts)
 * or a poll, a `: heartbeat` comment when quiet, ending once the resource has finished and its last event was
 * sent (right after the terminal event, or at once when that was sent before).
 */
export const followStream = <E, R>(options: {
  readonly after: number
  readonly read: (after: number) => Effect.Effect<ReadonlyArray<SseEvent>, E, R>
  /** The resource is over: no event will follow the ones stored. */
  readonly finished: Effect.Effect<boolean, E, R>
  readonly signal: (ms: number) => Effect.Effect<void>
  readonly heartbeatMs?: number | undefined
}): Stream.Stream<Uint8Array, E, R> => {
  const step = (at: FollowPosition): Effect.Effect<Option.Option<readonly [Uint8Array, FollowPosition]>, E, R> =>
    Effect.gen(function*() {
      for (;;) {
        const over = yield* options.finished
        const round = followRound(at, over, yield* options.read(at.after), options.heartbeatMs)
        if (round._tag === "send") return Option.some([round.bytes, round.next] as const)
        if (round._tag === "end") return Option.none()
        yield* options.signal(round.ms)
      }
    })
  return Stream.unfoldEffect({ after: options.after, quietSince: Date.now() }, step)
}

/** The headers of a held-open event stream. */
export const FOLLOW_HEADERS = { "cache-control": "no-store", "x-accel-buffering": "no" } as const

export const followResponse = <E>(stream: Stream.Stream<Uint8Array, E>) =>
  HttpServerResponse.stream(stream, { contentType: "text/event-stream", headers: FOLLOW_HEADERS })

/**
 * A held-open event stream: a first comment line at once (so the client knows it is connected), then the given
 * frames, with a `: keepalive` comment every 15 s between them. Ends when the frames end.
 */
export const liveSseBody = <E>(frames: Stream.Stream<string, E>): Stream.Stream<Uint8Array, E> =>
  Stream.concat(
    Stream.make(": connected\n\n"),
    Stream.merge(frames, Stream.fromSchedule(Schedule.spaced(FOLLOW_HEARTBEAT_MS)).pipe(Stream.as(": keepalive\n\n")), { haltStrategy: "left" })
  ).pipe(Stream.encodeText)

export const liveSseResponse = <E>(frames: Stream.Stream<string, E>) => followResponse(liveSseBody(frames))

/**
 * The last frame of a stream whose credential was revoked or expired or lost its access: `event: error` with the
 * error envelope (no `id:`, so a client's Last-Event-ID stays at the last event it got).
 */
export const endFrame = (reason: EndReason, requestId: string) => {
  const { code, message } = END_REASONS[reason]
  return `event: error\ndata: ${JSON.stringify({ code, message, request_id: requestId, retryable: false, details: { reason } })}\n\n`
}

/** Resolves once `signal` is aborted. */
const aborted = (signal: AbortSignal) =>
  Effect.async<void>((resume) => {
    if (signal.aborted) return resume(Effect.void)
    const onAbort = () => resume(Effect.void)
    signal.addEventListener("abort", onAbort, { once: true })
    return Effect.sync(() => signal.removeEventListener("abort", onAbort))
  })

/** A held-open stream, ended early once its credential may no longer read it. */
export type AllowedFor = <E, R>(stream: Stream.Stream<Uint8Array, E, R>) => Stream.Stream<Uint8Array, E, R>

/**
 * `stream`, held open for `holder` (registered with services/LiveStreams.ts while it runs): ended, with an
 * `endFrame`, as soon as the credential that opened it may no longer read it.
 */
export const whileAllowed = (streams: LiveStreamsShape, holder: StreamHolder, requestId: string): AllowedFor => (stream) =>
  Stream.unwrapScoped(Effect.map(
    Effect.acquireRelease(Effect.sync(() => streams.open(holder)), (held) => Effect.sync(held.close)),
    (held) =>
      Stream.concat(
        Stream.interruptWhen(stream, aborted(held.signal)),
        Stream.suspend(() => {
          const reason = held.endReason()
          return reason === undefined ? Stream.empty : Stream.make(encoder.encode(endFrame(reason, requestId)))
        })
      )
  ))

/** `whileAllowed` for the request being served (its id goes in the end frame). */
export const allowedFor = (streams: LiveStreamsShape, holder: StreamHolder) =>
  Effect.map(FiberRef.get(CurrentRequestId), (requestId) => whileAllowed(streams, holder, requestId))
