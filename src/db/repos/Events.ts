/** The durable event log, `domain_events` (reference/openmetal-api.md §8): appended in the transaction of the change. */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { newUuid, type OrganizationId, type ProjectId } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { Dialect } from "../Dialect.ts"
import { IdColumn, Json, rowsOf } from "../Rows.ts"
import { SubscriberRow } from "./Webhooks.ts"

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

/** An appended event's seq beside each webhook of its organization (none: one row of nulls). */
const AppendedRow = Schema.Struct({ seq: Schema.Int, id: Schema.NullOr(Schema.String), event_types: Schema.NullOr(SubscriberRow.fields.event_types) })

export class EventsRepo extends Effect.Service<EventsRepo>()("app/db/EventsRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    const events = rowsOf("domain_events", EventRow)
    const seqs = rowsOf("domain_events", Schema.Struct({ seq: Schema.Int }))
    const subscribers = rowsOf("webhooks", SubscriberRow, { memo: 256 })
    const appended = rowsOf("domain_events", AppendedRow)
    return {
      /**
       * Appends an event; returns it as stored (its `seq` orders the log) and the webhooks it goes to: the
       * organization's enabled endpoints whose filter takes its type (an empty filter takes every type; applied
       * here rather than in SQL, whose JSON functions differ between engines), in their order. On PostgreSQL the
       * endpoints are read in the append's statement.
       */
      append: (event: NewEvent) =>
        Effect.gen(function*() {
          const id = newUuid()
          const occurredAt = yield* nowIso
          const data = JSON.stringify(event.data)
          const inserted = sql`INSERT INTO domain_events (id, type, organization_id, project_id, occurred_at, data)
            SELECT ${id}, ${event.type}, ${event.organizationId}, ${event.projectId ?? null}, ${occurredAt}, ${data}${dialect.eventLogLocked}
            RETURNING seq${dialect.eventAppended}`
          // The organization's live webhooks, as `w`.
          const live = sql`w.organization_id = ${event.organizationId} AND w.enabled = 1 AND w.deleted_at IS NULL AND w.disabled_at IS NULL`
          let seq: number
          let endpoints: ReadonlyArray<typeof SubscriberRow.Type>
          if (dialect.engine === "pg") {
            const rows = yield* appended.all(sql`WITH e AS (${inserted})
              SELECT e.seq, w.id, w.event_types FROM e LEFT JOIN webhooks w ON ${live} ORDER BY w.created_at, w.id`)
            seq = rows[0]!.seq
            endpoints = rows.flatMap((r) => (r.id === null || r.event_types === null ? [] : [{ id: r.id, event_types: r.event_types }]))
          } else {
            seq = (yield* seqs.all(inserted))[0]!.seq
            endpoints = yield* subscribers.all(sql`SELECT w.id, w.event_types FROM webhooks w WHERE ${live} ORDER BY w.created_at, w.id`)
          }
          const row: EventRow = {
            seq,
            id,
            type: event.type,
            organization_id: event.organizationId,
            project_id: event.projectId ?? null,
            occurred_at: occurredAt,
            data: event.data
          }
          return { event: row, webhooks: endpoints.filter((w) => w.event_types.length === 0 || w.event_types.includes(event.type)) }
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
