import { HttpApiBuilder } from "@effect/platform"
import { Chunk, Effect, Queue, Schema, Stream } from "effect"
import { provideRepositories } from "../../db/Database.ts"
import { EventsRepo } from "../../db/repos/Events.ts"
import { eventCursor } from "../../domain/Cursor.ts"
import { CurrentUser } from "../../domain/Principals.ts"
import { requireProjectRole } from "../../services/Access.ts"
import { EventFeed } from "../../services/EventFeed.ts"
import { LiveStreams, userHolder } from "../../services/LiveStreams.ts"
import { Api } from "../Api.ts"
import { decodeCursor, page } from "../Pagination.ts"
import { allowedFor, followResponse, liveSseBody, sseFrame } from "../Sse.ts"
import { eventToWire } from "../wire/Accounts.ts"

/** An event cursor holds the event's sequence number in the log. */
const EventPosition = Schema.Tuple(Schema.Int.pipe(Schema.positive()))
const STREAM_BATCH = 100

export const EventsLive = HttpApiBuilder.group(Api, "events", (handlers) =>
  Effect.gen(function*() {
    const events = yield* EventsRepo
    const feed = yield* EventFeed
    const streams = yield* LiveStreams
    const provide = yield* provideRepositories

    /**
     * The project's events after `afterSeq`, as frames: what the log holds now, then more each time the feed
     * signals new events of the project. Each read starts after the last event sent, so nothing is sent twice
     * and a coalesced signal loses nothing.
     */
    const frames = (projectId: string, afterSeq: number) =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const signal = yield* feed.watch(projectId)
        let sent = afterSeq
        const next = Effect.gen(function*() {
          while (true) {
            const rows = yield* events.ofProject(projectId, sent, STREAM_BATCH)
            const last = rows[rows.length - 1]
            if (last !== undefined) {
              sent = last.seq
              return Chunk.fromIterable(rows.map((r) => {
                const cursor = eventCursor(r)
                return sseFrame({ id: cursor, event: r.type, data: eventToWire(r, cursor) })
              }))
            }
            yield* Queue.take(signal)
          }
        })
        return Stream.repeatEffectChunk(next)
      }))

    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          // Any member may read, so the only refusal is the non-member's 404.
          yield* requireProjectRole(urlParams.project_id).pipe(Effect.catchTag("Forbidden", Effect.die))
          // The scope binds cursors to this project: another project's cursor is a 422.
          const scope = `events:${urlParams.project_id}`
          const after = urlParams.after === undefined ? 0 : (yield* decodeCursor(scope, urlParams.after, EventPosition, "after"))[0]
          const rows = yield* events.ofProject(urlParams.project_id, after, urlParams.limit + 1)
          const { items, next } = page(rows, urlParams.limit, scope, (last) => [last.seq])
          return { events: items.map((r) => eventToWire(r, eventCursor(r))), next_cursor: next }
        }).pipe(provide))
      .handle("stream", ({ headers, urlParams }) =>
        Effect.gen(function*() {
          yield* requireProjectRole(urlParams.project_id).pipe(Effect.catchTag("Forbidden", Effect.die))
          const scope = `events:${urlParams.project_id}`
          const resumeFrom = headers["last-event-id"]
          // Where to start: after the last frame the client saw, after `after`, or after what is committed now.
          const afterSeq = resumeFrom !== undefined
            ? (yield* decodeCursor(scope, resumeFrom, EventPosition, "last-event-id"))[0]
            : urlParams.after !== undefined
            ? (yield* decodeCursor(scope, urlParams.after, EventPosition, "after"))[0]
            : yield* feed.lastSeq
          // Held open while the user's token is live and they are a member (services/LiveStreams.ts).
          const allowed = yield* allowedFor(streams, userHolder(yield* CurrentUser, urlParams.project_id))
          return followResponse(allowed(liveSseBody(frames(urlParams.project_id, afterSeq))))
        }).pipe(provide))
  }))
