/**
 * Runtime operations (spec §2.7): file reads, writes, lists and deletes run as `runtime.filesystem` jobs;
 * queued → running → succeeded | failed. A reclaimed write or delete whose outcome is unknown fails closed
 * (`runtime_operation_unknown_outcome`) rather than running twice; reads and lists are simply run again.
 */
import { Effect } from "effect"
import { provideRepositories } from "../../db/Database.ts"
import { inTransaction } from "../../db/Db.ts"
import { type FilesystemOperationKind, type FilesystemOperationRow, type RuntimeOperationKind, type RuntimeOperationRow, RuntimeOperationsRepo, type StoredResult } from "../../db/repos/RuntimeOperations.ts"
import type { ErrorObject } from "../../domain/Errors.ts"
import { nowIso } from "../../domain/Time.ts"
import type { ProviderError, ProviderSandbox, SandboxProvider } from "../../providers/Provider.ts"
import { appendEvent } from "../Events.ts"
import { type JobHandler, JobError } from "../JobRegistry.ts"
import { type FileOperation, fileFailure, logProviderFailure } from "./ProviderErrors.ts"
import { getSandboxRow, touchSandbox } from "./SandboxRows.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import type { RuntimeOperationId } from "../../domain/Ids.ts"

export type { RuntimeOperationKind, RuntimeOperationRow }

export const runtimeOperationJobKey = (kind: RuntimeOperationKind, id: RuntimeOperationId) => `runtime:${kind}:${id}`

export const getRuntimeOperationRow = (id: RuntimeOperationId) => RuntimeOperationsRepo.get(id)

const FILE_OPERATION: Record<FilesystemOperationKind, FileOperation> = {
  filesystem_read: "read",
  filesystem_write: "write",
  filesystem_list: "list",
  filesystem_delete: "delete"
}


/** Carries out the operation at the provider; a read also returns its bytes (stored apart from the result). */
const perform = (row: FilesystemOperationRow, provider: SandboxProvider, resource: ProviderSandbox): Effect.Effect<{ readonly result: StoredResult; readonly data?: Uint8Array }, ProviderError> => {
  switch (row.kind) {
    case "filesystem_read": {
      const r = row.request
      return Effect.map(provider.readFile(resource, { path: r.path, offsetBytes: r.offset_bytes, maxBytes: r.limit_bytes }), (read) => ({
        result: { kind: row.kind, path: r.path, offset_bytes: read.offsetBytes, byte_length: read.data.length, size_bytes: read.sizeBytes, eof: read.eof },
        data: read.data
      }))
    }
    case "filesystem_write": {
      const r = row.request
      return Effect.map(
        provider.writeFile(resource, { path: r.path, data: Buffer.from(r.data_base64 ?? "", "base64"), mode: r.mode, createParents: r.create_parents }),
        (written) => ({ result: { kind: row.kind, path: r.path, bytes_written: written.bytesWritten, created: written.created } })
      )
    }
    case "filesystem_list": {
      const r = row.request
      return Effect.map(provider.listFiles(resource, { path: r.path, recursive: r.recursive, maxEntries: r.max_entries }), (listed) => ({
        result: {
          kind: row.kind,
          path: r.path,
          entries: listed.entries.map((e) => ({ path: e.path, type: e.type, size_bytes: e.sizeBytes, modified_at: e.modifiedAt })),
          truncated: listed.truncated
        }
      }))
    }
    case "filesystem_delete": {
      const r = row.request
      return Effect.map(provider.deleteFile(resource, { path: r.path, recursive: r.recursive }), (deleted) => ({
        result: { kind: row.kind, path: r.path, deleted: deleted.deleted }
      }))
    }
  }
}

export const makeRuntimeOperationHandler = Effect.gen(function*() {
  const accounts = yield* ProviderAccounts
  const operations = yield* RuntimeOperationsRepo

  /** Records the outcome and its durable event (`runtime_operation.completed` or `.failed`) in one transaction. */
  const complete = (row: FilesystemOperationRow, state: "succeeded" | "failed", result: StoredResult | null, error: ErrorObject | null, data?: Uint8Array) =>
    inTransaction(Effect.gen(function*() {
      if (!(yield* operations.complete(row.id, { state, result, error, data, now: yield* nowIso }))) return
      const sandbox = yield* getSandboxRow(row.sandbox_id)
      if (sandbox === undefined) return
      yield* appendEvent({
        type: state === "succeeded" ? "runtime_operation.completed" : "runtime_operation.failed",
        organizationId: sandbox.organization_id,
        projectId: row.project_id,
        data: { sandbox_id: row.sandbox_id, runtime_operation_id: row.id, kind: row.kind, path: row.request.path, ...(error !== null ? { error } : {}) }
      })
    }))

  const run = (id: RuntimeOperationId) =>
    Effect.gen(function*() {
      const found = yield* operations.get(id)
      // Computer operations are the `runtime.computer` job's (ComputerOperations.ts).
      if (found === undefined || found.kind === "computer_action" || found.kind === "computer_screenshot") return
      const row = found
      if (row.state !== "queued" && row.state !== "running") return
      if (row.state === "running" && (row.kind === "filesystem_write" || row.kind === "filesystem_delete")) {
        return yield* complete(row, "failed", null, {
          code: "runtime_operation_unknown_outcome",
          message: "The gateway restarted while this operation ran; it may or may not have been applied",
          retryable: false
        })
      }
      if (row.kind === "filesystem_write" && row.request.data_base64 === undefined) {
        // Only a finished write drops its data: a queued or running one has it, unless the row was tampered with.
        return yield* complete(row, "failed", null, { code: "runtime_operation_failed", message: "The write's data is missing", retryable: false })
      }
      const sandbox = yield* getSandboxRow(row.sandbox_id)
      const target = accounts.target(sandbox)
      if (sandbox === undefined || sandbox.state !== "ready" || target === undefined) {
        return yield* complete(row, "failed", null, {
          code: "invalid_sandbox_state",
          message: `The sandbox is ${sandbox?.state ?? "gone"}, not ready`,
          retryable: false
        })
      }
      yield* operations.markRunning(id, yield* nowIso)
      const kind = row.kind
      const outcome = yield* perform(row, target.provider, target.resource).pipe(
        Effect.map((value) => ({ ok: true as const, value })),
        // The answer says what failed in the user's terms (ProviderErrors.ts); the provider's words go to the log.
        Effect.catchAll((e) =>
          Effect.zipRight(logProviderFailure(kind, e), Effect.suspend(() => {
            const failure = fileFailure(FILE_OPERATION[kind], row.request.path, e)
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
      if (outcome.ok) yield* complete(row, "succeeded", outcome.value.result, null, outcome.value.data)
      else yield* complete(row, "failed", null, outcome.error)
    })

  const provide = yield* provideRepositories
  return {
    run: (job) => provide(run(job.payload.runtime_operation_id)),
    giveUp: (job, error) =>
      provide(Effect.flatMap(operations.get(job.payload.runtime_operation_id), (row) =>
        row === undefined || row.kind === "computer_action" || row.kind === "computer_screenshot" ? Effect.void : complete(row, "failed", null, error)))
  } satisfies JobHandler<{ readonly runtime_operation_id: RuntimeOperationId }>
})
