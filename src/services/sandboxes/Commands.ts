/**
 * The sandbox-plane mutations as the API accepts them: each writes, in one transaction, the resource row, its
 * operation, a durable event and the job, then wakes the runner (after commit). Provider work happens in jobs.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { conflict, type Conflict, notFound, PaymentRequired } from "../../domain/Errors.ts"
import { newId } from "../../domain/Ids.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import { type EndpointAddressing, endpointUrl, newEndpointToken } from "../../domain/EndpointAddress.ts"
import { sha256Hex } from "../Crypto.ts"
import { appendEvent } from "../Events.ts"
import { enqueueJob } from "../OperationRunner.ts"
import { endpointExpiryJob, getEndpointRow } from "./Endpoints.ts"
import { lifecycleJob } from "./LifecycleJobs.ts"
import { getOperation, insertOperation } from "./Operations.ts"
import { appendProcessEvent, getProcessRow, processJobKey, TERMINAL_PROCESS_STATES } from "./Processes.ts"
import { getRuntimeOperationRow, type RuntimeOperationKind, runtimeOperationJobKey } from "./RuntimeOperations.ts"
import { getSandboxRow, type SandboxRow, setSandboxState } from "./SandboxRows.ts"

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
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ balance_microusd: number }>`SELECT balance_microusd FROM billing_accounts WHERE organization_id = ${organizationId}`.pipe(Effect.orDie)
    const balance = rows[0]?.balance_microusd ?? 0
    if (balance <= 0) {
      return yield* new PaymentRequired({
        code: "insufficient_credits",
        message: "The organization has no credit left; add credit to create sandboxes",
        details: { balance_microusd: String(balance) }
      })
    }
  })

export interface CreateSandboxInput {
  /** The decoded request with defaults applied; echoed back as `requested`. */
  readonly requested: { readonly provider?: string | undefined; readonly metadata?: Readonly<Record<string, string>> | undefined }
}

export const createSandbox = (caller: Caller, input: CreateSandboxInput) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* requireCredit(caller.organizationId)
    const now = yield* nowIso
    const id = newId("sbx")
    const provider = input.requested.provider !== undefined && input.requested.provider !== "auto" ? input.requested.provider : null
    yield* sql`INSERT INTO sandboxes (id, project_id, organization_id, created_by_key_id, state, requested, provider, billing_mode, created_at, updated_at, metadata)
      VALUES (${id}, ${caller.projectId}, ${caller.organizationId}, ${caller.keyId}, 'routing', ${JSON.stringify(input.requested)},
              ${provider}, 'emulated', ${now}, ${now}, ${JSON.stringify(input.requested.metadata ?? {})})`.pipe(Effect.orDie)
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
    if (sandbox.capabilities !== null && !capabilityOf(sandbox, ["lifecycle", "pause"])) {
      return yield* conflict("unsupported_operation", `${sandbox.provider} sandboxes cannot be paused`, { provider: sandbox.provider })
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
    if (sandbox.capabilities !== null && !capabilityOf(sandbox, ["lifecycle", "resume"])) {
      return yield* conflict("capability_unsupported", `${sandbox.provider} sandboxes cannot be resumed`, { provider: sandbox.provider })
    }
    yield* setSandboxState(sandboxId, "resuming")
    const operationId = yield* insertOperation({ ...caller, type: "sandbox_resume", resourceId: sandboxId })
    yield* lifecycleJob("sandbox.resume", { sandbox_id: sandboxId, operation_id: operationId })
    return yield* mutation(sandboxId, operationId)
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
  let node: unknown = sandbox.capabilities === null ? null : JSON.parse(sandbox.capabilities)
  for (const key of path) node = node === null || typeof node !== "object" ? undefined : (node as Record<string, unknown>)[key]
  return node === true
}

const requireCapability = (sandbox: SandboxRow, path: ReadonlyArray<string>, what: string): Effect.Effect<void, Conflict> =>
  capabilityOf(sandbox, path)
    ? Effect.void
    : Effect.fail(conflict("capability_unsupported", `${sandbox.provider} sandboxes do not support ${what}`, { provider: sandbox.provider }))

export interface StartProcessInput {
  readonly command: ReadonlyArray<string>
  readonly cwd?: string | undefined
  readonly environment?: Readonly<Record<string, string>> | undefined
  readonly timeout_seconds: number
  readonly max_output_bytes: number
}

export const startProcess = (caller: Caller, sandboxId: string, input: StartProcessInput) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const sandbox = yield* readySandboxOf(caller, sandboxId)
    yield* requireCapability(sandbox, ["process", "execute"], "processes")
    const now = yield* nowIso
    const id = newId("proc")
    yield* sql`INSERT INTO processes (id, project_id, sandbox_id, created_by_key_id, state, command, cwd, environment, timeout_seconds, max_output_bytes, created_at)
      VALUES (${id}, ${caller.projectId}, ${sandboxId}, ${caller.keyId}, 'queued', ${JSON.stringify(input.command)}, ${input.cwd ?? null},
              ${JSON.stringify(input.environment ?? {})}, ${input.timeout_seconds}, ${input.max_output_bytes}, ${now})`.pipe(Effect.orDie)
    yield* sql`UPDATE sandboxes SET last_activity_at = ${now} WHERE id = ${sandboxId}`.pipe(Effect.orDie)
    yield* appendProcessEvent(id, "queued", {})
    yield* enqueueJob({ type: "process.execute", dedupeKey: processJobKey(id), payload: { process_id: id } })
    return (yield* getProcessRow(id))!
  })

/** A process of the caller's project, or 404. */
export const processOf = (caller: Caller, sandboxId: string, processId: string) =>
  Effect.flatMap(getProcessRow(processId), (row) =>
    row === undefined || row.project_id !== caller.projectId || row.sandbox_id !== sandboxId ? Effect.fail(notFound("Process")) : Effect.succeed(row))

export const cancelProcess = (caller: Caller, sandboxId: string, processId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const sandbox = yield* sandboxOf(caller, sandboxId)
    const row = yield* processOf(caller, sandboxId, processId)
    if (TERMINAL_PROCESS_STATES.includes(row.state)) {
      return yield* conflict("process_terminal", `The process already ${row.state === "succeeded" ? "succeeded" : `is ${row.state}`}`, { state: row.state })
    }
    if (row.state !== "queued") yield* requireCapability(sandbox, ["process", "cancel"], "cancelling processes")
    if (row.cancel_requested_at === null) {
      const now = yield* nowIso
      yield* sql`UPDATE processes SET cancel_requested_at = ${now}, state = 'cancelling' WHERE id = ${processId}`.pipe(Effect.orDie)
      yield* appendProcessEvent(processId, "cancel_requested", {})
    }
    return (yield* getProcessRow(processId))!
  })

export const startRuntimeOperation = (caller: Caller, sandboxId: string, kind: RuntimeOperationKind, request: unknown) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const sandbox = yield* readySandboxOf(caller, sandboxId)
    const capability = kind.replace("filesystem_", "")
    yield* requireCapability(sandbox, ["filesystem", capability], `filesystem ${capability}`)
    if (kind === "filesystem_write") {
      const mode = (request as { mode: string }).mode
      const modes = (JSON.parse(sandbox.capabilities ?? "{}") as { filesystem?: { write_modes?: Array<string> } }).filesystem?.write_modes ?? []
      if (!modes.includes(mode)) {
        return yield* conflict("capability_unsupported", `${sandbox.provider} sandboxes do not support write mode ${mode}`, { provider: sandbox.provider, supported: modes })
      }
      if ((request as { create_parents: boolean }).create_parents) yield* requireCapability(sandbox, ["filesystem", "create_parents"], "create_parents")
    }
    const now = yield* nowIso
    const id = newId("rop")
    yield* sql`INSERT INTO runtime_operations (id, project_id, sandbox_id, kind, state, request, created_at)
      VALUES (${id}, ${caller.projectId}, ${sandboxId}, ${kind}, 'queued', ${JSON.stringify(request)}, ${now})`.pipe(Effect.orDie)
    yield* sql`UPDATE sandboxes SET last_activity_at = ${now} WHERE id = ${sandboxId}`.pipe(Effect.orDie)
    yield* enqueueJob({ type: "runtime.filesystem", dedupeKey: runtimeOperationJobKey(kind, id), payload: { runtime_operation_id: id } })
    return (yield* getRuntimeOperationRow(id))!
  })

export const runtimeOperationOf = (caller: Caller, sandboxId: string, id: string) =>
  Effect.flatMap(getRuntimeOperationRow(id), (row) =>
    row === undefined || row.project_id !== caller.projectId || row.sandbox_id !== sandboxId ? Effect.fail(notFound("Runtime operation")) : Effect.succeed(row))

export const createEndpoint = (caller: Caller, sandboxId: string, input: { readonly port: number; readonly protocol: string; readonly lease_seconds: number }, addressing: EndpointAddressing) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const sandbox = yield* readySandboxOf(caller, sandboxId)
    yield* requireCapability(sandbox, ["http_endpoints", "create"], "HTTP endpoints")
    const existing = yield* sql<{ id: string }>`SELECT id FROM endpoints WHERE sandbox_id = ${sandboxId} AND port = ${input.port}
      AND state IN ('provisioning', 'active', 'revoking')`.pipe(Effect.orDie)
    if (existing.length > 0) {
      return yield* conflict("endpoint_conflict", `Port ${input.port} already has a live endpoint`, { endpoint_id: existing[0]!.id })
    }
    const now = yield* nowIso
    const id = newId("ep")
    const token = newEndpointToken()
    const row = {
      id,
      lease_expires_at: isoAfter(now, input.lease_seconds)
    }
    yield* sql`INSERT INTO endpoints (id, project_id, sandbox_id, port, protocol, state, url, token_hash, lease_expires_at, created_at, updated_at)
      VALUES (${id}, ${caller.projectId}, ${sandboxId}, ${input.port}, ${input.protocol}, 'provisioning', ${endpointUrl(addressing, id, token)},
              ${sha256Hex(token)}, ${row.lease_expires_at}, ${now}, ${now})`.pipe(Effect.orDie)
    yield* sql`UPDATE sandboxes SET last_activity_at = ${now} WHERE id = ${sandboxId}`.pipe(Effect.orDie)
    yield* enqueueJob({ type: "endpoint.create", dedupeKey: `endpoint:create:${id}`, payload: { endpoint_id: id } })
    yield* endpointExpiryJob(row)
    yield* appendEvent({ type: "endpoint.created", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: sandboxId, endpoint_id: id, port: input.port } })
    return (yield* getEndpointRow(id))!
  })

export const endpointOf = (caller: Caller, sandboxId: string, id: string) =>
  Effect.flatMap(getEndpointRow(id), (row) =>
    row === undefined || row.project_id !== caller.projectId || row.sandbox_id !== sandboxId ? Effect.fail(notFound("Endpoint")) : Effect.succeed(row))

/** Idempotent once revoked or expired. */
export const revokeEndpoint = (caller: Caller, sandboxId: string, id: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sandboxOf(caller, sandboxId)
    const row = yield* endpointOf(caller, sandboxId, id)
    if (row.state === "provisioning" || row.state === "active") {
      const now = yield* nowIso
      yield* sql`UPDATE endpoints SET state = 'revoking', updated_at = ${now} WHERE id = ${id}`.pipe(Effect.orDie)
      yield* enqueueJob({ type: "endpoint.revoke", dedupeKey: `endpoint:revoke:${id}`, payload: { endpoint_id: id } })
      yield* appendEvent({ type: "endpoint.revoked", organizationId: caller.organizationId, projectId: caller.projectId, data: { sandbox_id: sandboxId, endpoint_id: id } })
    }
    return (yield* getEndpointRow(id))!
  })
