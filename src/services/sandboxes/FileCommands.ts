/**
 * File operations as the API accepts them (read, write, list, delete): each a runtime operation row and its job,
 * answered 202 to poll; the work is RuntimeOperations.ts's job. Raw reads and writes are RawFiles.ts.
 */
import { Effect } from "effect"
import { inTransaction } from "../../db/Db.ts"
import { RuntimeOperationsRepo } from "../../db/repos/RuntimeOperations.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { notFound } from "../../domain/Errors.ts"
import type { DeleteFile, ListFiles, ReadFile, WriteFile } from "../../domain/Runtime.ts"
import { newId, type RuntimeOperationId, type SandboxId } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { enqueueJob } from "../JobRegistry.ts"
import { FilesystemJob } from "./JobTypes.ts"
import type { FileOperation } from "./ProviderErrors.ts"
import { getRuntimeOperationRow, runtimeOperationJobKey } from "./RuntimeOperations.ts"
import { type Caller, readySandboxOf, requireCapability } from "./SandboxAccess.ts"
import { unsupportedCall } from "./Unsupported.ts"

/** A file operation as the API accepted it (defaults applied). */
export type RuntimeOperationInput =
  | { readonly kind: "filesystem_read"; readonly request: typeof ReadFile.Type }
  | { readonly kind: "filesystem_write"; readonly request: typeof WriteFile.Type }
  | { readonly kind: "filesystem_list"; readonly request: typeof ListFiles.Type }
  | { readonly kind: "filesystem_delete"; readonly request: typeof DeleteFile.Type }

export const startRuntimeOperation = (caller: Caller, sandboxId: SandboxId, request: RuntimeOperationInput) =>
  inTransaction(Effect.gen(function*() {
    const kind = request.kind
    const sandbox = yield* readySandboxOf(caller, sandboxId)
    const operation = kind.replace("filesystem_", "") as FileOperation
    yield* requireCapability(sandbox, ["filesystem", operation], { kind: "files", operation })
    if (request.kind === "filesystem_write") {
      const mode = request.request.mode
      const modes = sandbox.capabilities?.filesystem.write_modes ?? []
      if (!modes.includes(mode)) {
        return yield* unsupportedCall(sandbox, { kind: "write_mode", mode }, { supported: modes })
      }
      if (request.request.create_parents) yield* requireCapability(sandbox, ["filesystem", "create_parents"], { kind: "create_parents" })
    }
    const now = yield* nowIso
    const id = newId("rop")
    yield* RuntimeOperationsRepo.insert({ id, projectId: caller.projectId, sandboxId, kind, request: request.request, now })
    yield* SandboxesRepo.touch(sandboxId)
    yield* enqueueJob(FilesystemJob, { dedupeKey: runtimeOperationJobKey(kind, id), payload: { runtime_operation_id: id }, sandboxId, ordered: true })
    return (yield* getRuntimeOperationRow(id))!
  })).pipe(Effect.withSpan("FileCommands.startRuntimeOperation", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))

export const runtimeOperationOf = (caller: Caller, sandboxId: SandboxId, id: RuntimeOperationId) =>
  Effect.flatMap(getRuntimeOperationRow(id), (row) =>
    row === undefined || row.project_id !== caller.projectId || row.sandbox_id !== sandboxId ? Effect.fail(notFound("Runtime operation")) : Effect.succeed(row))

