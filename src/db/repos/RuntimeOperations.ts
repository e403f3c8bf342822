/**
 * Runtime (file) operations, `runtime_operations`, and the bytes a read returned, `runtime_operation_data` (raw,
 * written once, removed with their operation). The stored request and result decode per kind.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { ErrorObject } from "../../domain/Errors.ts"
import { ComputerAction, ComputerActionResult, ComputerScreenshotResult, TakeScreenshot } from "../../domain/Computer.ts"
import { FilesystemDeleteResult, FilesystemListResult, FilesystemReadResult, FilesystemWriteResult } from "../../domain/Runtime.ts"
import { WriteMode } from "../../domain/Sandbox.ts"
import { Dialect } from "../Dialect.ts"
import { IdColumn, Json, rowsOf, run } from "../Rows.ts"
import type { ProjectId, RuntimeOperationId, SandboxId } from "../../domain/Ids.ts"

export type RuntimeOperationKind = "filesystem_read" | "filesystem_write" | "filesystem_list" | "filesystem_delete" | "computer_action" | "computer_screenshot"
export type FilesystemOperationKind = Exclude<RuntimeOperationKind, "computer_action" | "computer_screenshot">

/** The stored results: a read's bytes are kept apart (older rows may still carry them as `data_base64`). */
export const StoredResult = Schema.Union(
  Schema.Struct({ ...FilesystemReadResult.fields, data_base64: Schema.optional(Schema.String) }),
  FilesystemWriteResult,
  FilesystemListResult,
  FilesystemDeleteResult,
  ComputerActionResult,
  // A screenshot's bytes are kept apart too.
  Schema.Struct({ ...ComputerScreenshotResult.fields, data_base64: Schema.optional(Schema.String) })
)
export type StoredResult = typeof StoredResult.Type

/** The requests as accepted (defaults applied); a finished write keeps only its path and options. */
export const ReadRequest = Schema.Struct({ path: Schema.String, offset_bytes: Schema.NonNegativeInt, limit_bytes: Schema.NonNegativeInt })
export const WriteRequest = Schema.Struct({ path: Schema.String, data_base64: Schema.optional(Schema.String), mode: WriteMode, create_parents: Schema.Boolean })
export const ListRequest = Schema.Struct({ path: Schema.String, recursive: Schema.Boolean, max_entries: Schema.NonNegativeInt })
export const DeleteRequest = Schema.Struct({ path: Schema.String, recursive: Schema.Boolean })

const common = {
  id: IdColumn.runtimeOperation,
  project_id: IdColumn.project,
  sandbox_id: IdColumn.sandbox,
  state: Schema.Literal("queued", "running", "succeeded", "failed", "cancelled"),
  result: Schema.NullOr(Json(StoredResult)),
  error: Schema.NullOr(Json(ErrorObject)),
  created_at: Schema.String,
  started_at: Schema.NullOr(Schema.String),
  completed_at: Schema.NullOr(Schema.String),
  /** The bytes a file read returned (runtime_operation_data), when the row was read with them. */
  data: Schema.optional(Schema.NullOr(Schema.Uint8ArrayFromSelf))
}

export const RuntimeOperationRow = Schema.Union(
  Schema.Struct({ ...common, kind: Schema.Literal("filesystem_read"), request: Json(ReadRequest) }),
  Schema.Struct({ ...common, kind: Schema.Literal("filesystem_write"), request: Json(WriteRequest) }),
  Schema.Struct({ ...common, kind: Schema.Literal("filesystem_list"), request: Json(ListRequest) }),
  Schema.Struct({ ...common, kind: Schema.Literal("filesystem_delete"), request: Json(DeleteRequest) }),
  Schema.Struct({ ...common, kind: Schema.Literal("computer_action"), request: Json(ComputerAction) }),
  Schema.Struct({ ...common, kind: Schema.Literal("computer_screenshot"), request: Json(TakeScreenshot) })
)
export type RuntimeOperationRow = typeof RuntimeOperationRow.Type
export type FilesystemOperationRow = Extract<RuntimeOperationRow, { readonly kind: FilesystemOperationKind }>
export type ComputerOperationRow = Extract<RuntimeOperationRow, { readonly kind: "computer_action" | "computer_screenshot" }>

/** The row with a read's bytes (also read by src/db/FastReadQueries.ts). */
export const RUNTIME_OPERATION_WITH_DATA = `SELECT r.*, d.data AS data FROM runtime_operations r
  LEFT JOIN runtime_operation_data d ON d.runtime_operation_id = r.id WHERE r.id = ?`

const SANDBOX_STOPPED = JSON.stringify({ code: "sandbox_stopped", message: "The sandbox stopped", retryable: false })

export class RuntimeOperationsRepo extends Effect.Service<RuntimeOperationsRepo>()("app/db/RuntimeOperationsRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    const operations = rowsOf("runtime_operations", RuntimeOperationRow)
    const ids = rowsOf("runtime_operations", Schema.Struct({ id: IdColumn.runtimeOperation }))
    const counts = rowsOf("runtime_operations", Schema.Struct({ n: Schema.Int }))

    return {
      get: (id: RuntimeOperationId) => operations.first(sql.unsafe(dialect.positional(RUNTIME_OPERATION_WITH_DATA), [id])),
      insert: (operation: { readonly id: RuntimeOperationId; readonly projectId: ProjectId; readonly sandboxId: SandboxId; readonly kind: RuntimeOperationKind; readonly request: unknown; readonly now: string }) =>
        run(sql`INSERT INTO runtime_operations (id, project_id, sandbox_id, kind, state, request, created_at)
          VALUES (${operation.id}, ${operation.projectId}, ${operation.sandboxId}, ${operation.kind}, 'queued', ${JSON.stringify(operation.request)}, ${operation.now})`),
      markRunning: (id: RuntimeOperationId, now: string) => run(sql`UPDATE runtime_operations SET state = 'running', started_at = ${now} WHERE id = ${id}`),
      /**
       * Records the outcome of a queued or running operation (false if it had ended), in one transaction; a read's bytes go to
       * runtime_operation_data, raw. A finished write no longer needs its data (up to 14 MB of base64 in the
       * stored request): only its path and options stay.
       */
      complete: (id: RuntimeOperationId, outcome: { readonly state: "succeeded" | "failed"; readonly result: StoredResult | null; readonly error: ErrorObject | null; readonly data?: Uint8Array | undefined; readonly now: string }) =>
        Effect.gen(function*() {
          const updated = yield* ids.all(sql`UPDATE runtime_operations SET state = ${outcome.state},
              result = ${outcome.result === null ? null : JSON.stringify(outcome.result)},
              error = ${outcome.error === null ? null : JSON.stringify(outcome.error)}, completed_at = ${outcome.now},
              request = CASE WHEN kind = 'filesystem_write' THEN ${dialect.jsonWithout("request", "data_base64")} ELSE request END
            WHERE id = ${id} AND state IN ('queued', 'running') RETURNING id`)
          if (outcome.data !== undefined && updated.length > 0) {
            yield* Effect.orDie(dialect.insertOrReplace("runtime_operation_data", { runtime_operation_id: id, data: outcome.data }))
          }
          return updated.length > 0
        }).pipe(sql.withTransaction, Effect.orDie),
      /** How many operations of these kinds the sandbox has queued or running (computer use bounds its queue). */
      countLive: (sandboxId: SandboxId, kinds: ReadonlyArray<RuntimeOperationKind>) =>
        Effect.map(
          counts.first(
            sql`SELECT COUNT(*) AS n FROM runtime_operations WHERE sandbox_id = ${sandboxId} AND state IN ('queued', 'running') AND ${sql.in("kind", kinds)}`
          ),
          (row) => row?.n ?? 0
        ),
      /** Operations of a stopped sandbox that had not ended fail with `sandbox_stopped`. */
      failLiveOf: (sandboxId: SandboxId, now: string) =>
        run(sql`UPDATE runtime_operations SET state = 'failed', completed_at = ${now}, error = ${SANDBOX_STOPPED}
          WHERE sandbox_id = ${sandboxId} AND state IN ('queued', 'running')`),
      /** Removes up to `limit` operations that ended before `before` (their data goes with them); returns how many went. */
      deleteEndedBefore: (before: string, limit: number) =>
        Effect.map(
          sql`DELETE FROM runtime_operations WHERE ${dialect.rowId} IN (
              SELECT ${dialect.rowId} FROM runtime_operations WHERE completed_at IS NOT NULL AND completed_at < ${before} LIMIT ${limit})
            RETURNING 1`.pipe(Effect.orDie),
          (rows) => rows.length
        )
    }
  })
}) {}
