/**
 * Sandbox rows and their wire form (spec §2.4). States follow reference/openmetal-api.md §3; a destroyed sandbox
 * is `stopped`, never deleted, so its id keeps answering.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Sandbox } from "../../domain/Sandbox.ts"
import { nowIso } from "../../domain/Time.ts"
import type { ProviderRegistry, ProviderSandbox, SandboxProvider } from "../../../providers/core/Provider.ts"

export type SandboxState =
  | "requested"
  | "routing"
  | "provisioning"
  | "provision_unknown"
  | "ready"
  | "pausing"
  | "paused"
  | "resuming"
  | "runtime_unknown"
  | "stopping"
  | "stopped"
  | "failed"
  | "cleanup_pending"
  | "cleanup_failed"

/** States in which the sandbox (may) hold a provider resource and counts as live. */
export const LIVE_STATES: ReadonlyArray<SandboxState> = [
  "requested",
  "routing",
  "provisioning",
  "provision_unknown",
  "ready",
  "pausing",
  "paused",
  "resuming",
  "runtime_unknown",
  "stopping",
  "cleanup_pending"
]

export interface SandboxRow {
  readonly id: string
  readonly project_id: string
  readonly organization_id: string
  readonly created_by_key_id: string | null
  readonly state: SandboxState
  readonly state_reason: string | null
  readonly requested: string
  readonly provider: string | null
  readonly billing_mode: string
  readonly resolved_resources: string | null
  readonly provider_resource: string | null
  readonly capabilities: string | null
  readonly cost_microusd: number | null
  readonly cost_updated_at: string | null
  readonly created_at: string
  readonly updated_at: string
  readonly ready_at: string | null
  readonly paused_at: string | null
  readonly stopped_at: string | null
  readonly last_activity_at: string | null
  readonly metadata: string
}

export const sandboxToWire = (row: SandboxRow): typeof Sandbox.Type => {
  const resolved = row.resolved_resources === null
    ? null
    : (JSON.parse(row.resolved_resources) as {
      vcpu: number
      memoryMb: number
      diskMb: number | null
      architecture: string
      providerSize: string | null
    })
  return {
    id: row.id,
    type: "sandbox" as const,
    project_id: row.project_id,
    state: row.state,
    state_reason: row.state_reason,
    requested: JSON.parse(row.requested) as typeof Sandbox.Type["requested"],
    provider: row.provider as typeof Sandbox.Type["provider"],
    billing_mode: row.billing_mode as typeof Sandbox.Type["billing_mode"],
    resolved_resources: resolved === null
      ? null
      : {
        vcpu: resolved.vcpu,
        memory_mb: resolved.memoryMb,
        disk_mb: resolved.diskMb,
        architecture: resolved.architecture,
        provider_size: resolved.providerSize
      },
    cost_microusd: row.cost_microusd === null ? null : String(row.cost_microusd),
    cost_updated_at: row.cost_updated_at,
    created_at: row.created_at,
    updated_at: row.updated_at,
    ready_at: row.ready_at,
    paused_at: row.paused_at,
    stopped_at: row.stopped_at,
    metadata: JSON.parse(row.metadata) as Record<string, string>
  }
}

/** The capability snapshot taken when the sandbox became ready, as embedded in its processes, operations and endpoints. */
export const capabilitiesOf = (sandbox: SandboxRow | null | undefined): unknown => (sandbox?.capabilities ? JSON.parse(sandbox.capabilities) : null)

export const getSandboxRow = (id: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<SandboxRow>`SELECT * FROM sandboxes WHERE id = ${id}`
    return rows[0]
  }).pipe(Effect.orDie)

/** Sets the state (and the timestamp that goes with it) unless the row is already in one of `unless`. */
export const setSandboxState = (
  id: string,
  state: SandboxState,
  extra: { readonly reason?: string | null; readonly unless?: ReadonlyArray<SandboxState> } = {}
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    const unless = extra.unless ?? []
    const stamp = state === "ready" ? "ready_at" : state === "paused" ? "paused_at" : state === "stopped" ? "stopped_at" : null
    const updated = yield* sql`UPDATE sandboxes SET state = ${state}, updated_at = ${now},
        state_reason = ${extra.reason === undefined ? sql`state_reason` : extra.reason},
        ${stamp === null ? sql`updated_at = updated_at` : sql`${sql(stamp)} = ${now}`}
        ${state === "ready" || state === "resuming" ? sql`, last_activity_at = ${now}` : sql``}
      WHERE id = ${id} ${unless.length > 0 ? sql`AND state NOT IN ${sql.in(unless)}` : sql``} RETURNING id`
    return updated.length > 0
  }).pipe(Effect.orDie)

/** The provider serving a sandbox and its resource there, if it has one. */
export const providerTarget = (
  registry: typeof ProviderRegistry.Service,
  sandbox: SandboxRow | undefined
): { readonly provider: SandboxProvider; readonly resource: ProviderSandbox; readonly sandbox: SandboxRow } | undefined => {
  if (sandbox?.provider == null || sandbox.provider_resource === null) return undefined
  const provider = registry.get(sandbox.provider)
  return provider === undefined ? undefined : { provider, resource: JSON.parse(sandbox.provider_resource) as ProviderSandbox, sandbox }
}

/** Records API activity on a sandbox (idle timeout bookkeeping). */
export const touchSandbox = (id: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    yield* sql`UPDATE sandboxes SET last_activity_at = ${now} WHERE id = ${id}`
  }).pipe(Effect.orDie)
