/**
 * Operations, `operations` and `operation_events`: the asynchronous record a client waits on (spec §2.5), and its
 * events numbered 1, 2, … per operation (on PostgreSQL from `last_event_seq`, see `appendEvent`).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { ErrorObject } from "../../domain/Errors.ts"
import { OperationState, OperationType } from "../../domain/Operation.ts"
import { nowIso } from "../../domain/Time.ts"
import { Dialect } from "../Dialect.ts"
import { IdColumn, Json, rowsOf, run } from "../Rows.ts"
import type { ApiKeyId, OperationId, OrganizationId, ProjectId, SandboxId } from "../../domain/Ids.ts"

export type OperationTypeValue = typeof OperationType.Type
export type OperationStateValue = typeof OperationState.Type

export const OperationRow = Schema.Struct({
  id: IdColumn.operation,
  project_id: IdColumn.project,
  organization_id: IdColumn.organization,
  created_by_key_id: Schema.NullOr(IdColumn.apiKey),
  type: OperationType,
  state: OperationState,
  resource_type: Schema.String,
  resource_id: IdColumn.sandbox,
  error: Schema.NullOr(Json(ErrorObject)),
  created_at: Schema.String,
  updated_at: Schema.String,
  completed_at: Schema.NullOr(Schema.String)
})
export type OperationRow = typeof OperationRow.Type

export const OperationEventRow = Schema.Struct({
  seq: Schema.Int,
  type: Schema.String,
  occurred_at: Schema.String,
  data: Json(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type OperationEventRow = typeof OperationEventRow.Type

/** An operation's events after a sequence number, in order (also read by db/FastReadQueries.ts). */
export const OPERATION_EVENTS_AFTER = "SELECT seq, type, occurred_at, data FROM operation_events WHERE operation_id = ? AND seq > ? ORDER BY seq"

export interface NewOperation {
  readonly id: OperationId
  readonly projectId: ProjectId
  readonly organizationId: OrganizationId
  readonly keyId: ApiKeyId | null
  readonly type: OperationTypeValue
  readonly state: OperationStateValue
  readonly resourceId: SandboxId
  readonly completed: boolean
}

export class OperationsRepo extends Effect.Service<OperationsRepo>()("app/db/OperationsRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    const operations = rowsOf("operations", OperationRow)
    const events = rowsOf("operation_events", OperationEventRow)
    const ids = rowsOf("operations", Schema.Struct({ id: IdColumn.operation }))
    /**
     * Appends an event with the operation's next sequence number. SQLite runs one write at a time, so `MAX + 1` in
     * the INSERT is exact there (one statement, the fast path). On PostgreSQL concurrent transactions would
     * compute the same `MAX + 1`, so the number comes from the operation's counter (migration 0009), taken and
     * used in one statement: the row lock orders concurrent appends (gap-free, unique, even outside a
     * transaction), and `GREATEST` with the events already there covers a counter SQLite never kept (`db copy`).
     * `announce`: a topic told to the other processes on the database at commit (Db.announce; SQLite: nothing).
     */
    const appendEvent = (operationId: OperationId, type: string, data: Readonly<Record<string, unknown>>, announce?: string) =>
      Effect.flatMap(nowIso, (now) => {
        const body = JSON.stringify(data)
        const appended = sql.onDialectOrElse({
          pg: () =>
            sql`WITH n AS (
                UPDATE operations SET last_event_seq = GREATEST(last_event_seq,
                  (SELECT COALESCE(MAX(seq), 0) FROM operation_events WHERE operation_id = ${operationId})) + 1
                WHERE id = ${operationId} RETURNING last_event_seq)
              INSERT INTO operation_events (operation_id, seq, type, occurred_at, data)
              SELECT ${operationId}, last_event_seq, ${type}, ${now}, ${body} FROM n
              RETURNING seq${dialect.announced(announce)}`,
          orElse: () =>
            sql`INSERT INTO operation_events (operation_id, seq, type, occurred_at, data)
              SELECT id, (SELECT COALESCE(MAX(seq), 0) + 1 FROM operation_events WHERE operation_id = ${operationId}), ${type}, ${now}, ${body}
              FROM operations WHERE id = ${operationId} RETURNING seq`
        })
        return Effect.flatMap(Effect.orDie(appended), (rows) => rows.length > 0 ? Effect.void : Effect.dieMessage(`no operation ${operationId} to append an event to`))
      })
    return {
      get: (id: OperationId) => operations.first(sql`SELECT * FROM operations WHERE id = ${id}`),
      /** Ends every unfinished operation on a resource as failed with `error`; returns their ids. */
      failUnfinishedOf: (resourceId: SandboxId, error: ErrorObject, now: string) =>
        Effect.map(
          sql<{ id: string }>`UPDATE operations SET state = 'failed', error = ${JSON.stringify(error)}, updated_at = ${now}, completed_at = ${now}
            WHERE resource_id = ${resourceId} AND state NOT IN ('succeeded', 'failed', 'cancelled') RETURNING id`.pipe(Effect.orDie),
          (rows) => rows.map((r) => r.id)
        ),
      /**
       * Inserts an operation with its first events (numbered 1, 2, …: nothing else can append to it yet); returns
       * it as stored. On PostgreSQL one statement.
       */
      insert: (operation: NewOperation, first: ReadonlyArray<{ readonly type: string; readonly data: Readonly<Record<string, unknown>> }>) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const inserted = sql`INSERT INTO operations (id, project_id, organization_id, created_by_key_id, type, state, resource_type, resource_id, created_at, updated_at, completed_at, last_event_seq)
            VALUES (${operation.id}, ${operation.projectId}, ${operation.organizationId}, ${operation.keyId}, ${operation.type}, ${operation.state},
                    'sandbox', ${operation.resourceId}, ${now}, ${now}, ${operation.completed ? now : null}, ${first.length}) RETURNING *`
          if (first.length === 0) return (yield* operations.all(inserted))[0]!
          const values = sql.csv(first.map((e, i) => sql`(${operation.id}, ${i + 1}, ${e.type}, ${now}, ${JSON.stringify(e.data)})`))
          if (dialect.engine === "pg") {
            const [row] = yield* operations.all(sql`WITH o AS (${inserted}), e AS (
                INSERT INTO operation_events (operation_id, seq, type, occurred_at, data)
                SELECT v.operation_id, v.seq::int, v.type, v.occurred_at, v.data FROM o, (VALUES ${values}) AS v(operation_id, seq, type, occurred_at, data))
              SELECT * FROM o`)
            return row!
          }
          const [row] = yield* operations.all(inserted)
          yield* run(sql`INSERT INTO operation_events (operation_id, seq, type, occurred_at, data) VALUES ${values}`)
          return row!
        }),
      appendEvent,
      /**
       * Moves an operation to `state` (never out of a terminal one, never to the state it is in) and appends `event`
       * for it, announced as `announce` (see `appendEvent`); false when nothing moved (then no event). On PostgreSQL
       * one statement: the same row update takes the event's number.
       */
      setState: (
        id: OperationId,
        state: OperationStateValue,
        error: ErrorObject | null,
        completed: boolean,
        event: { readonly type: string; readonly data: Readonly<Record<string, unknown>> },
        announce: string
      ) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const errorText = error === null ? null : JSON.stringify(error)
          const moved = sql.onDialectOrElse({
            pg: () =>
              sql<{ seq: number }>`WITH n AS (
                  UPDATE operations SET state = ${state}, error = ${errorText}, updated_at = ${now}, completed_at = ${completed ? now : null},
                    last_event_seq = GREATEST(last_event_seq, (SELECT COALESCE(MAX(seq), 0) FROM operation_events WHERE operation_id = ${id})) + 1
                  WHERE id = ${id} AND state NOT IN ('succeeded', 'failed', 'cancelled') AND state <> ${state} RETURNING last_event_seq)
                INSERT INTO operation_events (operation_id, seq, type, occurred_at, data)
                SELECT ${id}, last_event_seq, ${event.type}, ${now}, ${JSON.stringify(event.data)} FROM n
                RETURNING seq${dialect.announced(announce)}`.pipe(Effect.orDie, Effect.map((rows) => rows.length > 0)),
            orElse: () =>
              Effect.gen(function*() {
                const updated = yield* ids.all(sql`UPDATE operations SET state = ${state}, error = ${errorText},
                    updated_at = ${now}, completed_at = ${completed ? now : null}
                  WHERE id = ${id} AND state NOT IN ('succeeded', 'failed', 'cancelled') AND state <> ${state} RETURNING id`)
                if (updated.length === 0) return false
                yield* appendEvent(id, event.type, event.data, announce)
                return true
              })
          })
          return yield* moved
        }),
      eventsAfter: (operationId: OperationId, afterSeq: number) =>
        events.all(sql.unsafe(dialect.positional(OPERATION_EVENTS_AFTER), [operationId, afterSeq]))
    }
  })
}) {}
