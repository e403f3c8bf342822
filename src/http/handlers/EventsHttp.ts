import { HttpApiBuilder } from "@effect/platform"
import { Effect, Schema, Stream } from "effect"
import { eventCursor } from "../../domain/Cursor.ts"
import { CurrentUser } from "../../domain/Principals.ts"
import { requireProjectRole } from "../../services/Access.ts"
import { followProjectEvents, lastEventSeq, projectEvents } from "../../services/Events.ts"
import { LiveStreams, userHolder } from "../../services/LiveStreams.ts"
import { provideServiceContext } from "../../services/ServiceContext.ts"
import { Api } from "../Api.ts"
import { decodeCursor, page } from "../Pagination.ts"
import { allowedFor, followResponse, liveSseBody, sseFrame } from "../Sse.ts"
import { eventToWire } from "../wire/Accounts.ts"

/** An event cursor holds the event's sequence number in the log. */
const EventPosition = Schema.Tuple(Schema.Int.pipe(Schema.positive()))
const STREAM_BATCH = 100

export const EventsLive = HttpApiBuilder.group(Api, "events", (handlers) =>
  Effect.gen(function*() {
    const streams = yield* LiveStreams
    const provide = yield* provideServiceContext

    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          // Any member may read, so the only refusal is the non-member's 404.
          yield* requireProjectRole(urlParams.project_id).pipe(Effect.catchTag("Forbidden", Effect.die))
          // The scope binds cursors to this project: another project's cursor is a 422.
          const scope = `events:${urlParams.project_id}`
          const after = urlParams.after === undefined ? 0 : (yield* decodeCursor(scope, urlParams.after, EventPosition, "after"))[0]
          const rows = yield* projectEvents(urlParams.project_id, after, urlParams.limit + 1)
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
            : yield* lastEventSeq
          const frames = Stream.map(yield* followProjectEvents(urlParams.project_id, afterSeq, STREAM_BATCH), (r) => {
            const cursor = eventCursor(r)
            return sseFrame({ id: cursor, event: r.type, data: eventToWire(r, cursor) })
          })
          // Held open while the user's token is live and they are a member (services/LiveStreams.ts).
          const allowed = yield* allowedFor(streams, userHolder(yield* CurrentUser, urlParams.project_id))
          return followResponse(allowed(liveSseBody(frames)))
        }).pipe(provide))
  }))
