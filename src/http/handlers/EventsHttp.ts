import { HttpApiBuilder } from "@effect/platform"
import { Effect, Schema } from "effect"
import { provideRepositories } from "../../db/Database.ts"
import { EventsRepo } from "../../db/repos/Events.ts"
import { requireProjectRole } from "../../services/Access.ts"
import { Api } from "../Api.ts"
import { decodeCursor, encodeCursor, page } from "../Pagination.ts"
import { eventToWire } from "../wire/Accounts.ts"

/** An event cursor holds the event's sequence number in the log. */
const EventPosition = Schema.Tuple(Schema.Int.pipe(Schema.positive()))

export const EventsLive = HttpApiBuilder.group(Api, "events", (handlers) =>
  Effect.gen(function*() {
    const events = yield* EventsRepo
    const provide = yield* provideRepositories
    return handlers.handle("list", ({ urlParams }) =>
      Effect.gen(function*() {
        // Any member may read, so the only refusal is the non-member's 404.
        yield* requireProjectRole(urlParams.project_id).pipe(Effect.catchTag("Forbidden", Effect.die))
        // The scope binds cursors to this project: another project's cursor is a 422.
        const scope = `events:${urlParams.project_id}`
        const after = urlParams.after === undefined ? 0 : (yield* decodeCursor(scope, urlParams.after, EventPosition, "after"))[0]
        const rows = yield* events.ofProject(urlParams.project_id, after, urlParams.limit + 1)
        const { items, next } = page(rows, urlParams.limit, scope, (last) => [last.seq])
        return { events: items.map((r) => eventToWire(r, encodeCursor(scope, [r.seq]))), next_cursor: next }
      }).pipe(provide))
  }))
