/**
 * Runtime operations (spec §2.7): file reads, writes, lists and deletes run as `runtime.filesystem` jobs;
 * queued → running → succeeded | failed. A reclaimed write or delete whose outcome is unknown fails closed
 * (`runtime_operation_unknown_outcome`) rather than running twice; reads and lists are simply run again.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { ErrorObject } from "../../domain/Errors.ts"
import type { RuntimeOperation } from "../../domain/Runtime.ts"
import { nowIso } from "../../domain/Time.ts"
import { ProviderRegistry } from "../../../providers/core/Provider.ts"
import { type FileOperation, fileFailure, logProviderFailure } from "./ProviderErrors.ts"
import { type Job, type JobHandler, JobError } from "../OperationRunner.ts"
import { getSandboxRow, providerTarget, touchSandbox } from "./SandboxRows.ts"

export type RuntimeOperationKind = "filesystem_read" | "filesystem_write" | "filesystem_list" | "filesystem_delete"

export interface RuntimeOperationRow {
  readonly id: string
  readonly project_id: string
  readonly sandbox_id: string
  readonly kind: RuntimeOperationKind
  readonly state: "queued" | "running" | "succeeded" | "failed" | "cancelled"
  readonly request: string
  readonly result: string | null
  readonly error: string | null
  readonly created_at: string
  readonly started_at: string | null
  readonly completed_at: string | null
  /** The bytes a file read returned (from runtime_operation_data), when the row was read with them. */
  readonly data?: Uint8Array | null
}

/** The stored result, with a read's bytes (kept in runtime_operation_data) back in it as `data_base64`. */
const resultOf = (row: RuntimeOperationRow): typeof RuntimeOperation.Type["result"] => {
  if (row.result === null) return null
  const stored = JSON.parse(row.result) as Record<string, unknown>
  if (row.data === undefined || row.data === null || stored["data_base64"] !== undefined) return stored as typeof RuntimeOperation.Type["result"]
  const { kind, path, ...rest } = stored
  return { kind, path, data_base64: Buffer.from(row.data.buffer, row.data.byteOffset, row.data.byteLength).toString("base64"), ...rest } as typeof RuntimeOperation.Type["result"]
}

export const runtimeOperationToWire = (row: RuntimeOperationRow, providerCapabilities: unknown): typeof RuntimeOperation.Type => ({
  id: row.id,
  type: "runtime_operation" as const,
  project_id: row.project_id,
  sandbox_id: row.sandbox_id,
  kind: row.kind,
  state: row.state,
  result: resultOf(row),
  error: row.error === null ? null : (JSON.parse(row.error) as ErrorObject),
  created_at: row.created_at,
  started_at: row.started_at,
  completed_at: row.completed_at,
  provider_capabilities: providerCapabilities as typeof RuntimeOperation.Type["provider_capabilities"]
})

/** The row with a read's bytes. */
export const RUNTIME_OPERATION_WITH_DATA = `SELECT r.*, d.data AS data FROM runtime_operations r
  LEFT JOIN runtime_operation_data d ON d.runtime_operation_id = r.id WHERE r.id = ?`

export const runtimeOperationJobKey = (kind: RuntimeOperationKind, id: string) => `runtime:${kind}:${id}`

export const getRuntimeOperationRow = (id: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return (yield* sql.unsafe<RuntimeOperationRow>(RUNTIME_OPERATION_WITH_DATA, [id]))[0]
  }).pipe(Effect.orDie)

type FsRequest =
  | { readonly path: string; readonly offset_bytes: number; readonly limit_bytes: number }
  | { readonly path: string; readonly data_base64: string; readonly mode: "create" | "overwrite" | "append"; readonly create_parents: boolean }
  | { readonly path: string; readonly recursive: boolean; readonly max_entries: number }
  | { readonly path: string; readonly recursive: boolean }


export const makeRuntimeOperationHandler = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const registry = yield* ProviderRegistry

  /** Records the outcome; a read's bytes go to runtime_operation_data, raw, and its result keeps the rest. */
  const complete = (id: string, state: "succeeded" | "failed", result: unknown, error: ErrorObject | null, data?: Uint8Array) =>
    Effect.gen(function*() {
      const now = yield* nowIso
      // A finished write no longer needs its data (up to 14 MB of base64 in the stored request): only its path
      // and options stay.
      const updated = yield* sql`UPDATE runtime_operations SET state = ${state}, result = ${result === null ? null : JSON.stringify(result)},
        error = ${error === null ? null : JSON.stringify(error)}, completed_at = ${now},
        request = CASE WHEN kind = 'filesystem_write' THEN json_remove(request, '$.data_base64') ELSE request END
        WHERE id = ${id} AND state IN ('queued', 'running') RETURNING id`
      if (data !== undefined && updated.length > 0) {
        yield* sql`INSERT OR REPLACE INTO runtime_operation_data (runtime_operation_id, data) VALUES (${id}, ${data})`
      }
    }).pipe(sql.withTransaction, Effect.orDie)

  const run = (job: Job) =>
    Effect.gen(function*() {
      const { runtime_operation_id: id } = job.payload as { runtime_operation_id: string }
      const row = yield* getRuntimeOperationRow(id)
      if (row === undefined || (row.state !== "queued" && row.state !== "running")) return
      if (row.state === "running" && (row.kind === "filesystem_write" || row.kind === "filesystem_delete")) {
        return yield* complete(id, "failed", null, {
          code: "runtime_operation_unknown_outcome",
          message: "The gateway restarted while this operation ran; it may or may not have been applied",
          retryable: false
        })
      }
      const sandbox = yield* getSandboxRow(row.sandbox_id)
      const target = providerTarget(registry, sandbox)
      if (sandbox === undefined || sandbox.state !== "ready" || target === undefined) {
        return yield* complete(id, "failed", null, {
          code: "invalid_sandbox_state",
          message: `The sandbox is ${sandbox?.state ?? "gone"}, not ready`,
          retryable: false
        })
      }
      const now = yield* nowIso
      yield* sql`UPDATE runtime_operations SET state = 'running', started_at = ${now} WHERE id = ${id}`.pipe(Effect.orDie)
      const { provider, resource } = target
      const request = JSON.parse(row.request) as FsRequest
      const kind = row.kind
      let readData: Uint8Array | undefined
      const result = yield* Effect.gen(function*() {
        switch (kind) {
          case "filesystem_read": {
            const r = request as Extract<FsRequest, { offset_bytes: number }>
            const read = yield* provider.readFile(resource, { path: r.path, offsetBytes: r.offset_bytes, maxBytes: r.limit_bytes })
            readData = read.data
            return { kind, path: r.path, offset_bytes: read.offsetBytes, byte_length: read.data.length, size_bytes: read.sizeBytes, eof: read.eof }
          }
          case "filesystem_write": {
            const r = request as Extract<FsRequest, { data_base64: string }>
            const written = yield* provider.writeFile(resource, {
              path: r.path,
              data: Buffer.from(r.data_base64, "base64"),
              mode: r.mode,
              createParents: r.create_parents
            })
            return { kind, path: r.path, bytes_written: written.bytesWritten, created: written.created }
          }
          case "filesystem_list": {
            const r = request as Extract<FsRequest, { max_entries: number }>
            const listed = yield* provider.listFiles(resource, { path: r.path, recursive: r.recursive, maxEntries: r.max_entries })
            return {
              kind,
              path: r.path,
              entries: listed.entries.map((e) => ({ path: e.path, type: e.type, size_bytes: e.sizeBytes, modified_at: e.modifiedAt })),
              truncated: listed.truncated
            }
          }
          case "filesystem_delete": {
            const r = request as Extract<FsRequest, { recursive: boolean }>
            const deleted = yield* provider.deleteFile(resource, { path: r.path, recursive: r.recursive })
            return { kind, path: r.path, deleted: deleted.deleted }
          }
        }
      }).pipe(
        Effect.map((value) => ({ ok: true as const, value })),
        // The answer says what failed in the user's terms (ProviderErrors.ts); the provider's words go to the log.
        Effect.catchAll((e) =>
          Effect.zipRight(logProviderFailure(kind, e), Effect.suspend(() => {
            const failure = fileFailure(kind.replace("filesystem_", "") as FileOperation, request.path, e)
            if (failure.customer) return Effect.succeed({ ok: false as const, error: failure.error })
            return Effect.fail(
              new JobError({
                error: failure.error,
                retryable: (e.retryable || e.kind === "unavailable") && (kind === "filesystem_read" || kind === "filesystem_list")
              })
            )
          })))
      )
      yield* touchSandbox(row.sandbox_id)
      if (result.ok) yield* complete(id, "succeeded", result.value, null, readData)
      else yield* complete(id, "failed", null, result.error)
    }).pipe(Effect.provideService(SqlClient.SqlClient, sql))

  const giveUp = (job: Job, error: ErrorObject) =>
    complete((job.payload as { runtime_operation_id: string }).runtime_operation_id, "failed", null, error)

  return { run, giveUp } satisfies JobHandler
})
