/**
 * A caller's reach into the sandbox plane: who calls (a project key, or a member on the project path), the
 * sandboxes of its project (another project's is indistinguishable from none), the ready sandbox the runtime
 * routes need, and the capability a call needs (refused with what the create could have asked for).
 */
import { Effect } from "effect"
import { type Coded, conflict, type Conflict, notFound } from "../../domain/Errors.ts"
import type { ApiKeyId, OrganizationId, ProjectId, SandboxId } from "../../domain/Ids.ts"
import type { ProviderAccounts } from "../ProviderAccounts.ts"
import { getSandboxRow, type SandboxRow } from "./SandboxRows.ts"
import { type Need, unsupportedCall, type UnsupportedCode } from "./Unsupported.ts"

export interface Caller {
  readonly projectId: ProjectId
  readonly organizationId: OrganizationId
  /** The API key id (K routes) or null (user-token aliases). */
  readonly keyId: ApiKeyId | null
}

/** A sandbox of the caller's project, or 404 (another project's sandbox is indistinguishable from none). */
export const sandboxOf = (caller: Caller, sandboxId: SandboxId) =>
  Effect.flatMap(getSandboxRow(sandboxId), (row) =>
    row === undefined || row.project_id !== caller.projectId ? Effect.fail(notFound("Sandbox")) : Effect.succeed(row))

/** Runtime routes need a ready sandbox with a provider resource (reference §2 "Runtime"). */
export const readySandboxOf = (caller: Caller, sandboxId: SandboxId) =>
  Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    if (sandbox.state !== "ready" || sandbox.provider_resource === null) {
      return yield* conflict("invalid_sandbox_state", `The sandbox is ${sandbox.state}; this needs a ready sandbox`, { state: sandbox.state })
    }
    return sandbox
  })

/** Whether the sandbox's capability snapshot says true at `path` (false when it has no snapshot yet). */
export const capabilityOf = <K extends string>(sandbox: SandboxRow, path: ReadonlyArray<K>): boolean => {
  let node: unknown = sandbox.capabilities
  for (const key of path) node = node === null || typeof node !== "object" ? undefined : (node as Record<string, unknown>)[key]
  return node === true
}

/** The capability at `path` of the sandbox's snapshot, or 409 naming what the create could have asked for (Unsupported.ts). */
export const requireCapability = <const N extends Need>(
  sandbox: SandboxRow,
  path: ReadonlyArray<string>,
  need: N
): Effect.Effect<void, Coded<Conflict, UnsupportedCode<N["kind"]>>, ProviderAccounts> =>
  capabilityOf(sandbox, path) ? Effect.void : unsupportedCall(sandbox, need)

