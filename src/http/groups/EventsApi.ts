/**
 * The durable event log of a project (reference §8): ascending pages by cursor, and a held-open stream of the
 * events as they are committed (server-sent events, resumable with `Last-Event-ID`).
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { failsWith, NotFound } from "../../domain/Errors.ts"
import { EventList } from "../../domain/Accounts.ts"
import { ProjectId } from "../../domain/Ids.ts"
import { UserAuth } from "../Security.ts"
import { CursorParam, LimitParam } from "../Pagination.ts"

const LiveEventStream = HttpApiSchema.Text({ contentType: "text/event-stream" }).annotations({
  identifier: "LiveEventStream",
  description:
    "Held open. Each event is a frame `id: <cursor>`, `event: <type>`, `data: <DurableEvent JSON>`; a comment line (`: keepalive`) comes every 15 s"
})

export class EventsApi extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("list", "/v1/events")
      .addError(failsWith(NotFound, "not_found"))
      .setUrlParams(Schema.Struct({ project_id: ProjectId, after: Schema.optional(CursorParam), limit: LimitParam }))
      .addSuccess(EventList)
  )
  .add(
    HttpApiEndpoint.get("stream", "/v1/events/stream")
      .addError(failsWith(NotFound, "not_found"))
      .setUrlParams(Schema.Struct({ project_id: ProjectId, after: Schema.optional(CursorParam) }))
      .setHeaders(Schema.Struct({ "last-event-id": Schema.optional(CursorParam) }))
      .addSuccess(LiveEventStream)
      .annotate(
        OpenApi.Description,
        "The project's events as they are committed, held open. Starts after `Last-Event-ID` (an event cursor: the `id:` of the last frame received, or a `cursor` from `/v1/events`), else after `after`, else with the next event; reconnecting with `Last-Event-ID` resumes without gaps or duplicates, across server restarts too."
      )
  )
  .middleware(UserAuth)
  .annotate(OpenApi.Title, "Events")
  .annotate(OpenApi.Description, "Durable domain events of a project (any member may read), oldest first; pass `next_cursor` as `after` for the next page. A cursor of another project is a 422.")
{}
