/**
 * Recordings of sandboxes' desktops, `recordings`, and the mp4 of a stopped one in pieces, `recording_chunks`
 * (written once, in one transaction with the recording's `stopped`; removed with it). States: starting →
 * recording → stopping → stopped | failed; every move is a compare-and-set on the state it leaves.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { Effect, Schema } from "effect"
import { ErrorObject } from "../../domain/Errors.ts"
import { RecordingState } from "../../domain/Computer.ts"
import { IdColumn, Json, rowsOf, run } from "../Rows.ts"
import type { ProjectId, RecordingId, SandboxId } from "../../domain/Ids.ts"

export type RecordingState = typeof RecordingState.Type
export const LIVE_RECORDING_STATES: ReadonlyArray<RecordingState> = ["starting", "recording", "stopping"]
/** The mp4 is kept in pieces of this size. */
export const RECORDING_CHUNK_BYTES = 1024 * 1024

export const RecordingRow = Schema.Struct({
  id: IdColumn.recording,
  project_id: IdColumn.project,
  sandbox_id: IdColumn.sandbox,
  state: RecordingState,
  format: Schema.Literal("mp4"),
  label: Schema.NullOr(Schema.String),
  provider_recording_id: Schema.NullOr(Schema.String),
  byte_length: Schema.NullOr(Schema.Int),
  duration_ms: Schema.NullOr(Schema.Int),
  error: Schema.NullOr(Json(ErrorObject)),
  created_at: Schema.String,
  started_at: Schema.NullOr(Schema.String),
  stopped_at: Schema.NullOr(Schema.String),
  updated_at: Schema.String
})
export type RecordingRow = typeof RecordingRow.Type

const SANDBOX_STOPPED = JSON.stringify({ code: "sandbox_stopped", message: "The sandbox stopped while the recording was open", retryable: false })

export class RecordingsRepo extends Effect.Service<RecordingsRepo>()("app/db/RecordingsRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const recordings = rowsOf("recordings", RecordingRow)
    const ids = rowsOf("recordings", Schema.Struct({ id: IdColumn.recording }))
    const chunks = rowsOf("recording_chunks", Schema.Struct({ seq: Schema.Int, data: Schema.Uint8ArrayFromSelf }))
    /** Moves a recording from one of `from` to `to` with `set` (SQL assignments); false when it was elsewhere. */
    const move = (id: RecordingId, from: ReadonlyArray<RecordingState>, to: RecordingState, now: string, set?: Statement.Fragment) =>
      Effect.map(
        ids.all(sql`UPDATE recordings SET state = ${to}, updated_at = ${now}${set === undefined ? sql`` : sql`, ${set}`}
          WHERE id = ${id} AND state IN ${sql.in(from)} RETURNING id`),
        (rows) => rows.length > 0
      )
    return {
      get: (id: RecordingId) => recordings.first(sql`SELECT * FROM recordings WHERE id = ${id}`),
      insert: (r: { readonly id: RecordingId; readonly projectId: ProjectId; readonly sandboxId: SandboxId; readonly label: string | null; readonly now: string }) =>
        run(sql`INSERT INTO recordings (id, project_id, sandbox_id, state, format, label, created_at, updated_at)
          VALUES (${r.id}, ${r.projectId}, ${r.sandboxId}, 'starting', 'mp4', ${r.label}, ${r.now}, ${r.now})`),
      /** A sandbox's recordings, newest first, after the (created_at, id) position if given. */
      page: (sandboxId: SandboxId, after: readonly [string, string] | undefined, limit: number) =>
        recordings.all(after === undefined
          ? sql`SELECT * FROM recordings WHERE sandbox_id = ${sandboxId} ORDER BY created_at DESC, id DESC LIMIT ${limit}`
          : sql`SELECT * FROM recordings WHERE sandbox_id = ${sandboxId}
              AND (created_at < ${after[0]} OR (created_at = ${after[0]} AND id < ${after[1]}))
              ORDER BY created_at DESC, id DESC LIMIT ${limit}`),
      /** Whether the sandbox has a recording that is not over (pause is refused meanwhile). */
      liveOf: (sandboxId: SandboxId) =>
        Effect.map(ids.first(sql`SELECT id FROM recordings WHERE sandbox_id = ${sandboxId} AND state IN ${sql.in(LIVE_RECORDING_STATES)} LIMIT 1`), (row) => row?.id),
      /** The provider started it: starting → recording, with the provider's id. */
      markRecording: (id: RecordingId, providerRecordingId: string, now: string) =>
        move(id, ["starting"], "recording", now, sql`provider_recording_id = ${providerRecordingId}, started_at = ${now}`),
      markStopping: (id: RecordingId, now: string) => move(id, ["recording"], "stopping", now),
      /** Stopped, with its mp4 (in pieces) and length, in one transaction. */
      markStopped: (id: RecordingId, outcome: { readonly data: Uint8Array; readonly durationMs: number | null; readonly now: string }) =>
        Effect.gen(function*() {
          const moved = yield* move(id, ["stopping"], "stopped", outcome.now, sql`byte_length = ${outcome.data.length}, duration_ms = ${outcome.durationMs}, stopped_at = ${outcome.now}`)
          if (!moved) return false
          for (let seq = 0, at = 0; at < outcome.data.length; seq++, at += RECORDING_CHUNK_BYTES) {
            yield* run(sql`INSERT INTO recording_chunks (recording_id, seq, data) VALUES (${id}, ${seq}, ${outcome.data.subarray(at, at + RECORDING_CHUNK_BYTES)})`)
          }
          return true
        }).pipe(sql.withTransaction, Effect.orDie),
      /** Failed, from any live state (false once it had ended). */
      markFailed: (id: RecordingId, error: ErrorObject, now: string) =>
        move(id, LIVE_RECORDING_STATES, "failed", now, sql`error = ${JSON.stringify(error)}, stopped_at = ${now}`),
      /** The sandbox stopped: its open recordings fail with `sandbox_stopped`; answers their ids and that error. */
      failLiveOf: (sandboxId: SandboxId, now: string) =>
        Effect.map(
          ids.all(sql`UPDATE recordings SET state = 'failed', error = ${SANDBOX_STOPPED}, stopped_at = ${now}, updated_at = ${now}
            WHERE sandbox_id = ${sandboxId} AND state IN ${sql.in(LIVE_RECORDING_STATES)} RETURNING id`),
          (rows) => ({ ids: rows.map((r) => r.id), error: JSON.parse(SANDBOX_STOPPED) as ErrorObject })
        ),
      /** The pieces of the mp4 that hold bytes `from`…`to` (inclusive), in order. */
      chunksOf: (id: RecordingId, from: number, to: number) =>
        chunks.all(sql`SELECT seq, data FROM recording_chunks WHERE recording_id = ${id}
          AND seq >= ${Math.floor(from / RECORDING_CHUNK_BYTES)} AND seq <= ${Math.floor(to / RECORDING_CHUNK_BYTES)} ORDER BY seq`)
    }
  })
}) {}
