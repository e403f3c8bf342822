/**
 * Operations: the asynchronous record a client waits on (spec §2.5). Events are numbered per operation
 * (1, 2, …); every state change appends `state_changed`, or `completed` for a terminal state.
 */
import { Effect } from "effect"
import { type OperationRow, OperationsRepo, type OperationStateValue, type OperationTypeValue } from "../../db/repos/Operations.ts"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import type { ErrorObject } from "../../domain/Errors.ts"
import { type ApiKeyId, newId, type OperationId, type OrganizationId, type ProjectId, type SandboxId } from "../../domain/Ids.ts"
import { notify, operationTopic } from "../Signals.ts"

export type { OperationRow }
export type OperationType = OperationTypeValue
export type OperationState = OperationStateValue
export const TERMINAL_OPERATION_STATES: ReadonlySet<OperationState> = new Set(["succeeded", "failed", "cancelled"])

/** Appended and published (Signals.ts `publish`: here, and to the other replicas in the append's own statement). */
export const appendOperationEvent = (operationId: OperationId, type: string, data: Readonly<Record<string, unknown>>) =>
  Effect.zipLeft(OperationsRepo.appendEvent(operationId, type, data, operationTopic(operationId)), notify(operationTopic(operationId)))

export const insertOperation = (input: {
  readonly projectId: ProjectId
  readonly organizationId: OrganizationId
  readonly keyId: ApiKeyId | null
  readonly type: OperationType
  readonly resourceId: SandboxId
  readonly state?: OperationState
}) =>
  Effect.gen(function*() {
    const id = newId("op")
    const state = input.state ?? "queued"
    const terminal = TERMINAL_OPERATION_STATES.has(state)
    // Nobody can follow an operation before its id is answered: its first events need no announcement.
    return yield* OperationsRepo.insert({ ...input, id, state, completed: terminal }, [
      { type: "queued", data: { state: "queued" } },
      ...(state === "queued" ? [] : [{ type: terminal ? "completed" : "state_changed", data: { state } }])
    ])
  })

/** Moves an operation to a new state (no-op once terminal) and records the event. Returns false if it was terminal. */
export const setOperationState = (operationId: OperationId, state: OperationState, error: ErrorObject | null = null) =>
  Effect.gen(function*() {
    const terminal = TERMINAL_OPERATION_STATES.has(state)
    const event = { type: terminal ? "completed" : "state_changed", data: error === null ? { state } : { state, error } }
    if (!(yield* OperationsRepo.setState(operationId, state, error, terminal, event, operationTopic(operationId)))) return false
    yield* notify(operationTopic(operationId))
    return true
  })

export const getOperation = (operationId: OperationId) => OperationsRepo.get(operationId)

/** An operation's stored events after `afterSeq`. */
export const operationEventsAfter = (operationId: OperationId, afterSeq: number) => OperationsRepo.eventsAfter(operationId, afterSeq)

/** Whether the operation has ended (or is gone): a followed event stream closes then. */
export const operationFinished = (operationId: OperationId) =>
  Effect.map(OperationsRepo.get(operationId), (row) => row === undefined || TERMINAL_OPERATION_STATES.has(row.state))

/**
 * An operation as its reader may see it (reference §2 "Operations and events"): within its project, with the key
 * that caused it or the key that created its sandbox; `keyId: null` is a member's user token on the project path
 * (its access to the project checked by the caller). Anything else reads as absent (404, never 403).
 */
export const visibleOperation = (reader: { readonly projectId: ProjectId; readonly keyId: ApiKeyId | null }, operationId: OperationId) =>
  Effect.gen(function*() {
    const row = yield* OperationsRepo.get(operationId)
    if (row === undefined || row.project_id !== reader.projectId) return undefined
    if (reader.keyId === null || row.created_by_key_id === reader.keyId) return row
    if (row.resource_type !== "sandbox") return undefined
    const sandbox = yield* SandboxesRepo.get(row.resource_id)
    return sandbox?.created_by_key_id === reader.keyId ? row : undefined
  })
