/**
 * Processes, `processes` and `process_events` (spec §2.6): the command, its counters and outcome, and its ordered
 * output and lifecycle events, numbered 1, 2, … per process (`next_event_seq` hands out the numbers).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { ErrorObject } from "../../domain/Errors.ts"
import { ProcessState } from "../../domain/Runtime.ts"
import { nowIso } from "../../domain/Time.ts"
import { Dialect } from "../Dialect.ts"
import { IdColumn, IntBoolean, Json, rowsOf, run } from "../Rows.ts"
import type { ApiKeyId, ProcessId, ProjectId, SandboxId } from "../../domain/Ids.ts"

export type ProcessStateValue = typeof ProcessState.Type
export type TerminalProcessState = "succeeded" | "failed" | "cancelled" | "timed_out"

export const ProcessRow = Schema.Struct({
  id: IdColumn.process,
  project_id: IdColumn.project,
  sandbox_id: IdColumn.sandbox,
  created_by_key_id: Schema.NullOr(IdColumn.apiKey),
  state: ProcessState,
  command: Json(Schema.Array(Schema.String)),
  cwd: Schema.NullOr(Schema.String),
  environment: Json(Schema.Record({ key: Schema.String, value: Schema.String })),
  timeout_seconds: Schema.Int,
  max_output_bytes: Schema.Int,
  output_bytes: Schema.Int,
  stdout_bytes: Schema.Int,
  stderr_bytes: Schema.Int,
  output_truncated: IntBoolean,
  exit_code: Schema.NullOr(Schema.Int),
  termination_signal: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Json(ErrorObject)),
  execution_id: Schema.NullOr(Schema.String),
  next_event_seq: Schema.Int,
  provider_seq: Schema.Int,
  cancel_requested_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  started_at: Schema.NullOr(Schema.String),
  completed_at: Schema.NullOr(Schema.String),
  stdin: IntBoolean,
  stdin_closed_at: Schema.NullOr(Schema.String),
  pty_cols: Schema.NullOr(Schema.Int),
  pty_rows: Schema.NullOr(Schema.Int)
})
export type ProcessRow = typeof ProcessRow.Type

/** Row decoder shared by the repository and FastReads (each row version decoded once; see rowsOf). */
export const processRows = rowsOf("processes", ProcessRow, { memo: 512 })

export const ProcessEventRow = Schema.Struct({
  seq: Schema.Int,
  type: Schema.String,
  occurred_at: Schema.String,
  data: Json(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type ProcessEventRow = typeof ProcessEventRow.Type

/** A process's events after a sequence number, in order, at most a number of them (also read by db/FastReadQueries.ts). */
export const PROCESS_EVENTS_AFTER = "SELECT seq, type, occurred_at, data FROM process_events WHERE process_id = ? AND seq > ? ORDER BY seq LIMIT ?"

/** An event row as written (data already JSON). */
export interface NewProcessEvent {
  readonly process_id: ProcessId
  readonly seq: number
  readonly type: string
  readonly occurred_at: string
  readonly data: string
}

export interface NewProcess {
  readonly id: ProcessId
  readonly projectId: ProjectId
  readonly sandboxId: SandboxId
  readonly keyId: ApiKeyId | null
  readonly command: ReadonlyArray<string>
  readonly cwd: string | null
  readonly environment: Readonly<Record<string, string>>
  readonly timeoutSeconds: number
  readonly maxOutputBytes: number
  readonly stdin: boolean
  /** Started on a terminal of this size. */
  readonly pty: { readonly cols: number; readonly rows: number } | null
  readonly now: string
}

/** Where a batch of stored output leaves the process, and its outcome if it ended. */
export interface ProcessProgress {
  readonly providerSeq: number
  readonly nextEventSeq: number
  readonly outputBytes: number
  readonly stdoutBytes: number
  readonly stderrBytes: number
  readonly truncated: boolean
  readonly outcome?: {
    readonly state: TerminalProcessState
    readonly exitCode: number | null
    readonly signal: string | null
    readonly error: ErrorObject | null
    readonly now: string
  } | undefined
}

/** Event rows per INSERT (5 values each), under SQLite's limit on bound values per statement. */
const INSERT_ROWS = 500

export class ProcessesRepo extends Effect.Service<ProcessesRepo>()("app/db/ProcessesRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    const processes = processRows
    const events = rowsOf("process_events", ProcessEventRow)
    const seqs = rowsOf("processes", Schema.Struct({ seq: Schema.Int }))
    const progress = rowsOf("processes", Schema.Struct({ state: ProcessState, cancel_requested_at: Schema.NullOr(Schema.String), provider_seq: Schema.Int }))
    const ids = rowsOf("processes", Schema.Struct({ id: IdColumn.process }))
    const counts = rowsOf("processes", Schema.Struct({ n: Schema.Int }))

    return {
      get: (id: ProcessId) => processes.first(sql`SELECT * FROM processes WHERE id = ${id}`),
      /**
       * The row, locked until the transaction ends: for a writer that numbers events from `next_event_seq` as read
       * (a batch of output), so a concurrent `appendEvent` (a cancel request, on another connection or replica)
       * waits for it and numbers after it, and it never reads a counter that is about to move.
       */
      getForUpdate: (id: ProcessId) => processes.first(sql`SELECT * FROM processes WHERE id = ${id} ${dialect.forUpdate}`),
      /** What a running process's job looks at between two reads of its output. */
      progressOf: (id: ProcessId) => progress.first(sql`SELECT state, cancel_requested_at, provider_seq FROM processes WHERE id = ${id}`),
      insert: (process: NewProcess) =>
        run(sql`INSERT INTO processes (id, project_id, sandbox_id, created_by_key_id, state, command, cwd, environment, timeout_seconds, max_output_bytes, stdin, pty_cols, pty_rows, created_at)
          VALUES (${process.id}, ${process.projectId}, ${process.sandboxId}, ${process.keyId}, 'queued', ${JSON.stringify(process.command)}, ${process.cwd},
                  ${JSON.stringify(process.environment)}, ${process.timeoutSeconds}, ${process.maxOutputBytes}, ${process.stdin ? 1 : 0},
                  ${process.pty?.cols ?? null}, ${process.pty?.rows ?? null}, ${process.now})`),
      /** A terminal's new size. */
      resizeTerminal: (processId: ProcessId, size: { readonly cols: number; readonly rows: number }) =>
        run(sql`UPDATE processes SET pty_cols = ${size.cols}, pty_rows = ${size.rows} WHERE id = ${processId} AND pty_cols IS NOT NULL`),
      /** Records the end of a process's input; false when it was closed already. */
      closeStdin: (processId: ProcessId, now: string) =>
        Effect.map(
          sql`UPDATE processes SET stdin_closed_at = ${now} WHERE id = ${processId} AND stdin_closed_at IS NULL RETURNING id`.pipe(Effect.orDie),
          (rows) => rows.length > 0
        ),
      /**
       * Appends one event with the next sequence number of the process (call inside a transaction). `announce`: a
       * topic told to the other processes on the database at commit (Db.announce, in the INSERT on PostgreSQL:
       * no round trip of its own; SQLite: nothing).
       */
      appendEvent: (processId: ProcessId, type: string, data: Readonly<Record<string, unknown>>, announce?: string) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const row = yield* seqs.first(sql`UPDATE processes SET next_event_seq = next_event_seq + 1 WHERE id = ${processId} RETURNING next_event_seq AS seq`)
          yield* run(sql`INSERT INTO process_events (process_id, seq, type, occurred_at, data)
            VALUES (${processId}, ${row?.seq ?? 1}, ${type}, ${now}, ${JSON.stringify(data)}) RETURNING seq${dialect.announced(announce)}`)
        }),
      /** Event rows, in slices under the engine's limit on bound values. */
      insertEvents: (rows: ReadonlyArray<NewProcessEvent>) =>
        Effect.gen(function*() {
          for (let at = 0; at < rows.length; at += INSERT_ROWS) yield* run(sql`INSERT INTO process_events ${sql.insert(rows.slice(at, at + INSERT_ROWS).map((r) => ({ ...r })))}`)
        }),
      saveProgress: (processId: ProcessId, progress: ProcessProgress) => {
        const outcome = progress.outcome
        return run(sql`UPDATE processes SET provider_seq = ${progress.providerSeq}, next_event_seq = ${progress.nextEventSeq},
            output_bytes = ${progress.outputBytes}, stdout_bytes = ${progress.stdoutBytes}, stderr_bytes = ${progress.stderrBytes},
            output_truncated = ${progress.truncated ? 1 : 0}
            ${outcome === undefined ? sql`` : sql`, state = ${outcome.state}, exit_code = ${outcome.exitCode}, termination_signal = ${outcome.signal},
              error = ${outcome.error === null ? null : JSON.stringify(outcome.error)}, completed_at = ${outcome.now}`}
          WHERE id = ${processId}`)
      },
      /** Finishes a process (no-op if already terminal); true when it did. */
      finish: (processId: ProcessId, state: TerminalProcessState, fields: { readonly exitCode?: number | null; readonly signal?: string | null; readonly error?: ErrorObject | null; readonly truncated?: boolean }) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const updated = yield* ids.all(sql`UPDATE processes SET state = ${state}, exit_code = ${fields.exitCode ?? null},
              termination_signal = ${fields.signal ?? null}, error = ${fields.error ? JSON.stringify(fields.error) : null},
              output_truncated = CASE WHEN ${fields.truncated === true ? 1 : 0} = 1 THEN 1 ELSE output_truncated END,
              completed_at = ${now}
            WHERE id = ${processId} AND state NOT IN ('succeeded', 'failed', 'cancelled', 'timed_out') RETURNING id`)
          return updated.length > 0
        }),
      /** Records the start at the provider and its `started` event (one sequence number); returns the row. */
      recordStart: (processId: ProcessId, executionId: string, now: string) =>
        Effect.gen(function*() {
          const updated = (yield* processes.first(sql`UPDATE processes SET execution_id = ${executionId}, started_at = ${now},
              state = CASE WHEN state = 'queued' THEN 'running' ELSE state END, next_event_seq = next_event_seq + 1
            WHERE id = ${processId} RETURNING *`))!
          yield* run(sql`INSERT INTO process_events (process_id, seq, type, occurred_at, data)
            VALUES (${processId}, ${updated.next_event_seq}, 'started', ${now}, ${JSON.stringify({ execution_id: executionId })})`)
          return updated
        }),
      requestCancel: (processId: ProcessId, now: string) =>
        run(sql`UPDATE processes SET cancel_requested_at = ${now}, state = 'cancelling' WHERE id = ${processId}`),
      /** A sandbox's latest `limit` processes, newest first. */
      latestOf: (sandboxId: SandboxId, limit: number) =>
        processes.all(sql`SELECT * FROM processes WHERE sandbox_id = ${sandboxId} ORDER BY created_at DESC, id DESC LIMIT ${limit}`),
      /** Processes of a sandbox that have not ended. */
      liveOf: (sandboxId: SandboxId) =>
        Effect.map(ids.all(sql`SELECT id FROM processes WHERE sandbox_id = ${sandboxId} AND state IN ('queued', 'running', 'cancelling')`), (rows) => rows.map((r) => r.id)),
      busyCount: (sandboxId: SandboxId) =>
        Effect.map(counts.first(sql`SELECT COUNT(*) AS n FROM processes WHERE sandbox_id = ${sandboxId} AND state IN ('queued', 'running', 'cancelling')`), (row) => row?.n ?? 0),
      eventsAfter: (processId: ProcessId, afterSeq: number, limit: number) =>
        events.all(sql.unsafe(dialect.positional(PROCESS_EVENTS_AFTER), [processId, afterSeq, limit])),
      /** One stream's output events (`stdout` or `stderr`) after `afterSeq`, in order. */
      outputAfter: (processId: ProcessId, stream: "stdout" | "stderr", afterSeq: number, limit: number) =>
        events.all(sql`SELECT seq, type, occurred_at, data FROM process_events WHERE process_id = ${processId} AND type = ${stream} AND seq > ${afterSeq}
          ORDER BY seq LIMIT ${limit}`),
      /** Removes up to `limit` events of processes that ended before `before`; returns how many went. */
      deleteEventsEndedBefore: (before: string, limit: number) =>
        Effect.map(
          sql`DELETE FROM process_events WHERE ${dialect.rowId} IN (
              SELECT e.${dialect.rowId} FROM processes p JOIN process_events e ON e.process_id = p.id
              WHERE p.completed_at IS NOT NULL AND p.completed_at < ${before} LIMIT ${limit})
            RETURNING 1`.pipe(Effect.orDie),
          (rows) => rows.length
        )
    }
  })
}) {}
