/** The durable event log, `domain_events` (reference/openmetal-api.md §8): appended in the transaction of the change. */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { newUuid, type OrganizationId, type ProjectId } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { Dialect } from "../Dialect.ts"
import { IdColumn, Json, rowsOf } from "../Rows.ts"

export interface NewEvent {
  readonly type: string
  readonly organizationId: OrganizationId
  readonly projectId?: ProjectId | null | undefined
  readonly data: Readonly<Record<string, unknown>>
}

export const EventRow = Schema.Struct({
  seq: Schema.Int,
  id: Schema.String,
  type: Schema.String,
  organization_id: IdColumn.organization,
  project_id: Schema.NullOr(IdColumn.project),
  occurred_at: Schema.String,
  data: Json(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type EventRow = typeof EventRow.Type

export class EventsRepo extends Effect.Service<EventsRepo>()("app/db/EventsRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    const events = rowsOf("domain_events", EventRow)
    const seqs = rowsOf("domain_events", Schema.Struct({ seq: Schema.Int }))
    return {
      /** Appends an event; returns it as stored (its `seq` orders the log). */
      append: (event: NewEvent) =>
        Effect.gen(function*() {
          const id = newUuid()
          const occurredAt = yield* nowIso
          const data = JSON.stringify(event.data)
          const rows = yield* seqs.all(sql`INSERT INTO domain_events (id, type, organization_id, project_id, occurred_at, data)
            SELECT ${id}, ${event.type}, ${event.organizationId}, ${event.projectId ?? null}, ${occurredAt}, ${data}${dialect.eventLogLocked}
            RETURNING seq${dialect.eventAppended}`)
          const row: EventRow = {
            seq: rows[0]!.seq,
            id,
            type: event.type,
            organization_id: event.organizationId,
            project_id: event.projectId ?? null,
            occurred_at: occurredAt,
            data: event.data
          }
          return row
        }),
      /** A project's events after a sequence number, oldest first. */
      ofProject: (projectId: ProjectId, afterSeq: number, limit: number) =>
        events.all(sql`SELECT seq, id, type, organization_id, project_id, occurred_at, data FROM domain_events
          WHERE project_id = ${projectId} AND seq > ${afterSeq} ORDER BY seq LIMIT ${limit}`),
      /** The sequence number of the newest event (0 when the log is empty). */
      lastSeq: Effect.map(seqs.first(sql`SELECT seq FROM domain_events ORDER BY seq DESC LIMIT 1`), (row) => row?.seq ?? 0)
    }
  })
}) {}
