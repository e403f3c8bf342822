/**
 * The sandbox-plane mutations as the API accepts them: each writes, in one transaction, the resource row, its
 * operation, a durable event and the job, then wakes the runner (after commit). Provider work happens in jobs.
 */
import { Effect } from "effect"
import { BillingRepo } from "../../db/repos/Billing.ts"
import { EndpointsRepo } from "../../db/repos/Endpoints.ts"
import { ProcessesRepo } from "../../db/repos/Processes.ts"
import { RecordingsRepo } from "../../db/repos/Recordings.ts"
import { RuntimeOperationsRepo } from "../../db/repos/RuntimeOperations.ts"
import { SandboxesRepo, type StoredRequest } from "../../db/repos/Sandboxes.ts"
import { apiError, type Coded, conflict, type Conflict, notFound, PaymentRequired } from "../../domain/Errors.ts"
import type { DeleteFile, ListFiles, ReadFile, WriteFile } from "../../domain/Runtime.ts"
import { unknownEnvironment } from "../../domain/Environments.ts"
import { newId } from "../../domain/Ids.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import { type EndpointAddressing, endpointUrl, newEndpointToken } from "../../domain/EndpointAddress.ts"
import { sha256Hex } from "../../domain/Tokens.ts"
import { appendEvent } from "../Events.ts"
import { enqueueJob } from "../JobRegistry.ts"
import { endpointExpiryJob, getEndpointRow } from "./Endpoints.ts"
import { EndpointCreateJob, EndpointRevokeJob, ExtendLifetimeJob, FilesystemJob, ProcessExecuteJob } from "./JobTypes.ts"
import { armRuntimeTimeout, lifecycleJob, sandboxLockKey } from "./LifecycleJobs.ts"
import { getOperation, insertOperation } from "./Operations.ts"
import { appendProcessEvent, getProcessRow, processJobKey, TERMINAL_PROCESS_STATES } from "./Processes.ts"
import { getRuntimeOperationRow, runtimeOperationJobKey } from "./RuntimeOperations.ts"
import { getSandboxRow, type SandboxRow, setSandboxState } from "./SandboxRows.ts"
import type { FileOperation } from "./ProviderErrors.ts"
import { type Need, unsupportedCall } from "./Unsupported.ts"

export interface Caller {
  readonly projectId: string
  readonly organizationId: string
  /** The API key id (K routes) or null (user-token aliases). */
  readonly keyId: string | null
}

/** A sandbox of the caller's project, or 404 (another project's sandbox is indistinguishable from none). */
export const sandboxOf = (caller: Caller, sandboxId: string) =>
  Effect.flatMap(getSandboxRow(sandboxId), (row) =>
    row === undefined || row.project_id !== caller.projectId ? Effect.fail(notFound("Sandbox")) : Effect.succeed(row))

const mutation = (sandboxId: string, operationId: string) =>
  Effect.gen(function*() {
    const sandbox = (yield* getSandboxRow(sandboxId))!
    const operation = (yield* getOperation(operationId))!
    return { sandbox, operation }
  })

/** Creating a sandbox needs credit: the balance must be > 0 (reference §7 "Zero balance"). */
const requireCredit = (organizationId: string) =>
  Effect.gen(function*() {
    const balance = (yield* BillingRepo.balance(organizationId)) ?? 0n
    if (balance <= 0n) {
      return yield* apiError(PaymentRequired, "insufficient_credits", "The organization has no credit left; add credit to create sandboxes", { balance_microusd: String(balance) })
    }
  })

export interface CreateSandboxInput {
  /** The decoded request with defaults applied; echoed back as `requested`. */
  readonly requested: typeof StoredRequest.Type
}

export const createSandbox = (caller: Caller, input: CreateSandboxInput) =>
  Effect.gen(function*() {
    const environment = unknownEnvironment(input.requested.source)
    if (environment !== undefined) return yield* environment
    yield* requireCredit(caller.organizationId)
    const id = newId("sbx")
    const provider = input.requested.provider !== undefined && input.requested.provider !== "auto" ? input.requested.provider : null
    yield* SandboxesRepo.insert({ id, projectId: caller.projectId, organizationId: caller.organizationId, keyId: caller.keyId, requested: input.requested, provider })
    const operationId = yield* insertOperation({ ...caller, type: "sandbox_create", resourceId: id })
    yield* appendEvent({ type: "sandbox.requested", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: id, provider } })
    yield* lifecycleJob("sandbox.provision", { sandbox_id: id, operation_id: operationId })
    return yield* mutation(id, operationId)
  })

const PAUSABLE = new Set(["ready", "pausing"])

export const pauseSandbox = (caller: Caller, sandboxId: string) =>
  Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (sandbox.state === "paused") {
      const operationId = yield* insertOperation({ ...caller, type: "sandbox_pause", resourceId: sandboxId, state: "succeeded" })
      return yield* mutation(sandboxId, operationId)
    }
    if (!PAUSABLE.has(sandbox.state)) {
      return yield* conflict("invalid_sandbox_state", `A ${sandbox.state} sandbox cannot be paused`, { state: sandbox.state })
    }
    if (sandbox.capabilities !== null && !capabilityOf(sandbox, ["lifecycle", "pause"])) return yield* unsupportedCall(sandbox, { kind: "pause" })
    // A recording open on its desktop would freeze mid-file (reference §3 "Recording").
    const recording = yield* RecordingsRepo.liveOf(sandboxId)
    if (recording !== undefined) {
      return yield* conflict("recording_active", "The sandbox's desktop is being recorded; stop the recording before pausing it", { recording_id: recording })
    }
    yield* setSandboxState(sandboxId, "pausing")
    const operationId = yield* insertOperation({ ...caller, type: "sandbox_pause", resourceId: sandboxId })
    yield* lifecycleJob("sandbox.pause", { sandbox_id: sandboxId, operation_id: operationId })
    return yield* mutation(sandboxId, operationId)
  })

export const resumeSandbox = (caller: Caller, sandboxId: string) =>
  Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (sandbox.state === "ready") {
      const operationId = yield* insertOperation({ ...caller, type: "sandbox_resume", resourceId: sandboxId, state: "succeeded" })
      return yield* mutation(sandboxId, operationId)
    }
    if (sandbox.state !== "paused" && sandbox.state !== "resuming") {
      return yield* conflict("invalid_sandbox_state", `A ${sandbox.state} sandbox cannot be resumed; it must be paused`, { state: sandbox.state })
    }
    if (sandbox.capabilities !== null && !capabilityOf(sandbox, ["lifecycle", "resume"])) return yield* unsupportedCall(sandbox, { kind: "resume" })
    yield* setSandboxState(sandboxId, "resuming")
    const operationId = yield* insertOperation({ ...caller, type: "sandbox_resume", resourceId: sandboxId })
    yield* lifecycleJob("sandbox.resume", { sandbox_id: sandboxId, operation_id: operationId })
    return yield* mutation(sandboxId, operationId)
  })

/**
 * Moves a ready sandbox's runtime deadline to now + `seconds` (shorter or longer than before); a provider with its
 * own lifetime timer (E2B) is told in a job, after commit. The sandbox is answered with its new `expires_at`.
 */
export const extendSandbox = (caller: Caller, sandboxId: string, seconds: number) =>
  Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (sandbox.state !== "ready") {
      return yield* conflict("invalid_sandbox_state", `A ${sandbox.state} sandbox has no runtime deadline to move; it must be ready`, { state: sandbox.state })
    }
    yield* armRuntimeTimeout(sandboxId, isoAfter(yield* nowIso, seconds))
    yield* enqueueJob(ExtendLifetimeJob, {
      dedupeKey: `sandbox:extend_lifetime:${sandboxId}`,
      lockKey: sandboxLockKey(sandboxId),
      payload: { sandbox_id: sandboxId, seconds },
      replace: true,
      sandboxId
    })
    return (yield* getSandboxRow(sandboxId))!
  })

export const destroySandbox = (caller: Caller, sandboxId: string) =>
  Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (sandbox.state === "stopped") {
      const operationId = yield* insertOperation({ ...caller, type: "sandbox_destroy", resourceId: sandboxId, state: "succeeded" })
      return yield* mutation(sandboxId, operationId)
    }
    yield* setSandboxState(sandboxId, "stopping", { reason: "user_requested" })
    const operationId = yield* insertOperation({ ...caller, type: "sandbox_destroy", resourceId: sandboxId })
    yield* lifecycleJob("sandbox.destroy", { sandbox_id: sandboxId, operation_id: operationId })
    return yield* mutation(sandboxId, operationId)
  })

/** Runtime routes need a ready sandbox with a provider resource (reference §2 "Runtime"). */
export const readySandboxOf = (caller: Caller, sandboxId: string) =>
  Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (sandbox.state !== "ready" || sandbox.provider_resource === null) {
      return yield* conflict("invalid_sandbox_state", `The sandbox is ${sandbox.state}; this needs a ready sandbox`, { state: sandbox.state })
    }
    return sandbox
  })

const capabilityOf = <K extends string>(sandbox: SandboxRow, path: ReadonlyArray<K>): boolean => {
  let node: unknown = sandbox.capabilities
  for (const key of path) node = node === null || typeof node !== "object" ? undefined : (node as Record<string, unknown>)[key]
  return node === true
}

/** The capability at `path` of the sandbox's snapshot, or 409 naming what the create could have asked for (Unsupported.ts). */
export const requireCapability = (sandbox: SandboxRow, path: ReadonlyArray<string>, need: Need): Effect.Effect<void, Coded<Conflict, "capability_unsupported" | "unsupported_operation">, ProviderAccounts> =>
  capabilityOf(sandbox, path) ? Effect.void : unsupportedCall(sandbox, need)

export interface StartProcessInput {
  readonly command: ReadonlyArray<string>
  readonly cwd?: string | undefined
  readonly environment?: Readonly<Record<string, string>> | undefined
  readonly timeout_seconds: number
  readonly max_output_bytes: number
  readonly stdin: boolean
  readonly pty?: { readonly cols: number; readonly rows: number } | undefined
}

export const startProcess = (caller: Caller, sandboxId: string, input: StartProcessInput) =>
  Effect.gen(function*() {
    const sandbox = yield* readySandboxOf(caller, sandboxId)
    yield* requireCapability(sandbox, ["process", "execute"], { kind: "execute" })
    // Refused before anything starts: a provider that cannot take input never gets such a process.
    const provider = (yield* ProviderAccounts).target(sandbox)?.provider
    if (input.stdin && input.pty === undefined && (provider?.sendInput === undefined || provider.capabilities.process?.stdin === false)) {
      return yield* unsupportedCall(sandbox, { kind: "stdin" })
    }
    if (input.pty !== undefined && (provider?.capabilities.process?.terminal !== true || provider.resizeTerminal === undefined || provider.sendInput === undefined)) {
      return yield* unsupportedCall(sandbox, { kind: "terminal" })
    }
    const now = yield* nowIso
    const id = newId("proc")
    yield* ProcessesRepo.insert({
      id,
      projectId: caller.projectId,
      sandboxId,
      keyId: caller.keyId,
      command: input.command,
      cwd: input.cwd ?? null,
      environment: input.environment ?? {},
      timeoutSeconds: input.timeout_seconds,
      maxOutputBytes: input.max_output_bytes,
      // A terminal always takes input (typed through an attach or `…/stdin`).
      stdin: input.stdin || input.pty !== undefined,
      pty: input.pty ?? null,
      now
    })
    yield* SandboxesRepo.touch(sandboxId)
    yield* appendProcessEvent(id, "queued", {})
    yield* appendEvent({ type: "process.queued", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: sandboxId, process_id: id } })
    yield* enqueueJob(ProcessExecuteJob, { dedupeKey: processJobKey(id), payload: { process_id: id }, sandboxId, ordered: true })
    return (yield* getProcessRow(id))!
  })

/** A process of the caller's project, or 404. */
export const processOf = (caller: Caller, sandboxId: string, processId: string) =>
  Effect.flatMap(getProcessRow(processId), (row) =>
    row === undefined || row.project_id !== caller.projectId || row.sandbox_id !== sandboxId ? Effect.fail(notFound("Process")) : Effect.succeed(row))

export const cancelProcess = (caller: Caller, sandboxId: string, processId: string) =>
  Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    const row = yield* processOf(caller, sandboxId, processId)
    if (TERMINAL_PROCESS_STATES.includes(row.state)) {
      return yield* conflict("process_terminal", `The process already ${row.state === "succeeded" ? "succeeded" : `is ${row.state}`}`, { state: row.state })
    }
    if (row.state !== "queued") yield* requireCapability(sandbox, ["process", "cancel"], { kind: "cancel" })
    if (row.cancel_requested_at === null) {
      yield* ProcessesRepo.requestCancel(processId, yield* nowIso)
      yield* appendProcessEvent(processId, "cancel_requested", {})
      yield* appendEvent({ type: "process.cancel_requested", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: sandboxId, process_id: processId } })
    }
    return (yield* getProcessRow(processId))!
  })

/** A file operation as the API accepted it (defaults applied). */
export type RuntimeOperationInput =
  | { readonly kind: "filesystem_read"; readonly request: typeof ReadFile.Type }
  | { readonly kind: "filesystem_write"; readonly request: typeof WriteFile.Type }
  | { readonly kind: "filesystem_list"; readonly request: typeof ListFiles.Type }
  | { readonly kind: "filesystem_delete"; readonly request: typeof DeleteFile.Type }

export const startRuntimeOperation = (caller: Caller, sandboxId: string, request: RuntimeOperationInput) =>
  Effect.gen(function*() {
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
  })

export const runtimeOperationOf = (caller: Caller, sandboxId: string, id: string) =>
  Effect.flatMap(getRuntimeOperationRow(id), (row) =>
    row === undefined || row.project_id !== caller.projectId || row.sandbox_id !== sandboxId ? Effect.fail(notFound("Runtime operation")) : Effect.succeed(row))

export const createEndpoint = (caller: Caller, sandboxId: string, input: { readonly port: number; readonly protocol: string; readonly lease_seconds: number }, addressing: EndpointAddressing) =>
  Effect.gen(function*() {
    const sandbox = yield* readySandboxOf(caller, sandboxId)
    yield* requireCapability(sandbox, ["http_endpoints", "create"], { kind: "endpoints", port: input.port })
    const existing = yield* EndpointsRepo.liveOnPort(sandboxId, input.port)
    if (existing !== undefined) {
      return yield* conflict("endpoint_conflict", `Port ${input.port} already has a live endpoint`, { endpoint_id: existing })
    }
    const now = yield* nowIso
    const id = newId("ep")
    const token = newEndpointToken()
    const row = {
      id,
      lease_expires_at: isoAfter(now, input.lease_seconds)
    }
    yield* EndpointsRepo.insert({
      id,
      projectId: caller.projectId,
      sandboxId,
      port: input.port,
      protocol: input.protocol,
      url: endpointUrl(addressing, id, token),
      tokenHash: sha256Hex(token),
      leaseExpiresAt: row.lease_expires_at,
      now
    })
    yield* SandboxesRepo.touch(sandboxId)
    yield* enqueueJob(EndpointCreateJob, { dedupeKey: `endpoint:create:${id}`, payload: { endpoint_id: id }, sandboxId })
    yield* endpointExpiryJob({ ...row, sandbox_id: sandboxId })
    yield* appendEvent({ type: "endpoint.created", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: sandboxId, endpoint_id: id, port: input.port } })
    return (yield* getEndpointRow(id))!
  })

export const endpointOf = (caller: Caller, sandboxId: string, id: string) =>
  Effect.flatMap(getEndpointRow(id), (row) =>
    row === undefined || row.project_id !== caller.projectId || row.sandbox_id !== sandboxId ? Effect.fail(notFound("Endpoint")) : Effect.succeed(row))

/** Idempotent once revoked or expired. */
export const revokeEndpoint = (caller: Caller, sandboxId: string, id: string) =>
  Effect.gen(function*() {
    yield* sandboxOf(caller, sandboxId)
    const row = yield* endpointOf(caller, sandboxId, id)
    if (row.state === "provisioning" || row.state === "active") {
      yield* EndpointsRepo.markRevoking(id, yield* nowIso)
      yield* enqueueJob(EndpointRevokeJob, { dedupeKey: `endpoint:revoke:${id}`, payload: { endpoint_id: id }, sandboxId })
      yield* appendEvent({ type: "endpoint.revoked", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: sandboxId, endpoint_id: id } })
    }
    return (yield* getEndpointRow(id))!
  })
