/**
 * Sandboxes, `sandboxes` (and `provider_attempts`, the providers tried while one was provisioned). A destroyed
 * sandbox is `stopped`, never deleted, so its id keeps answering. JSON columns decode to domain values:
 * `requested` (the request as accepted, defaults applied), the provider resource, resolved resources, the
 * capability snapshot and metadata.
 */
import { SqlClient } from "@effect/sql"
import { AppConfig, nodeIdOf } from "../../Config.ts"
import { Effect, Schema } from "effect"
import { ProviderResource, StoredResolvedResources } from "../../domain/ProviderResource.ts"
import { Capabilities } from "../../domain/Runtime.ts"
import { Provider, ResolvedNetwork, SandboxRequest, SandboxState } from "../../domain/Sandbox.ts"
import { type ApiKeyId, newUuid, type OperationId, type OrganizationId, type ProjectId, type SandboxId } from "../../domain/Ids.ts"
import { nowIso } from "../../domain/Time.ts"
import { Dialect } from "../Dialect.ts"
import { IdColumn, IntBoolean, Json, MalformedRow, MicroUsd, rowsOf, run } from "../Rows.ts"

export type SandboxState = typeof SandboxState.Type
export type BillingMode = "managed" | "byok" | "emulated"

/** The request as stored: its encoded form, as `requested` echoes it. */
export const StoredRequest = Schema.encodedSchema(SandboxRequest)

/** The capability snapshot taken when the sandbox became ready (null before). */
const CapabilitiesColumn = Schema.NullOr(Json(Capabilities))

export const SandboxRow = Schema.Struct({
  id: IdColumn.sandbox,
  project_id: IdColumn.project,
  organization_id: IdColumn.organization,
  created_by_key_id: Schema.NullOr(IdColumn.apiKey),
  state: SandboxState,
  state_reason: Schema.NullOr(Schema.String),
  requested: Json(StoredRequest),
  provider: Schema.NullOr(Provider),
  billing_mode: Schema.Literal("managed", "byok", "emulated"),
  resolved_resources: Schema.NullOr(Json(StoredResolvedResources)),
  /** What the sandbox got of the network (migration 0011; null before ready and for rows older than it). */
  resolved_network: Schema.optionalWith(Schema.NullOr(Json(ResolvedNetwork)), { default: () => null }),
  provider_resource: Schema.NullOr(Json(ProviderResource)),
  capabilities: CapabilitiesColumn,
  cost_microusd: Schema.NullOr(MicroUsd),
  cost_updated_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String,
  ready_at: Schema.NullOr(Schema.String),
  paused_at: Schema.NullOr(Schema.String),
  stopped_at: Schema.NullOr(Schema.String),
  expires_at: Schema.NullOr(Schema.String),
  last_activity_at: Schema.NullOr(Schema.String),
  metadata: Json(Schema.Record({ key: Schema.String, value: Schema.String }))
})
export type SandboxRow = typeof SandboxRow.Type

/** What the jail reaper knows of a sandbox a jail claims to belong to (see `jailOwners`). */
export interface JailOwner {
  readonly state: SandboxState
  readonly resourceId: string | null
  readonly provisioning: boolean
}

/**
 * Row decoders, shared by the repository and FastReads (src/db/FastReadQueries.ts) so each row version is decoded
 * once. Sandboxes are read on every request about them and rarely change: worth remembering (see rowsOf).
 */
export const sandboxRows = rowsOf("sandboxes", SandboxRow, { memo: 512 })
/** Only the capability snapshot: what a process, file operation or endpoint embeds of its sandbox. */
export const capabilitiesRows = rowsOf("sandboxes", Schema.Struct({ capabilities: CapabilitiesColumn }))

const decodeRequest = Schema.decodeUnknown(SandboxRequest)

/** The stored request as the domain value (defaults applied); a stored request that no longer decodes is a defect. */
export const requestOf = (sandbox: SandboxRow): Effect.Effect<SandboxRequest> =>
  Effect.catchAll(decodeRequest(sandbox.requested), (e) => Effect.die(new MalformedRow({ table: "sandboxes", message: e.message })))

/** States in which a sandbox no longer holds anything at a provider. */
const ENDED = ["stopped", "failed", "cleanup_failed"] as const

export interface NewSandbox {
  readonly id: SandboxId
  readonly projectId: ProjectId
  readonly organizationId: OrganizationId
  readonly keyId: ApiKeyId | null
  readonly requested: typeof StoredRequest.Type
  readonly provider: string | null
}

export interface Attempt {
  readonly sandboxId: SandboxId
  readonly operationId: OperationId
  readonly attemptIndex: number
  readonly provider: string
  readonly outcome: string
  readonly code: string | null
  readonly message: string | null
  readonly unmetRequirements: unknown
}

/** What a list of sandboxes may be narrowed to. */
export interface SandboxFilter {
  readonly states?: ReadonlyArray<SandboxState> | undefined
  readonly provider?: string | undefined
  readonly metadata?: Readonly<Record<string, string>> | undefined
}

export class SandboxesRepo extends Effect.Service<SandboxesRepo>()("app/db/SandboxesRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    const node = nodeIdOf(yield* AppConfig)
    const nodeSandboxes = rowsOf("sandboxes", Schema.Struct({
      id: IdColumn.sandbox,
      organization_id: IdColumn.organization,
      project_id: IdColumn.project,
      provider: Schema.NullOr(Schema.String)
    }))
    const sandboxes = sandboxRows
    const live = rowsOf("sandboxes", Schema.Struct({ id: IdColumn.sandbox, state: SandboxState }))
    const ids = rowsOf("sandboxes", Schema.Struct({ id: IdColumn.sandbox }))
    const owners = rowsOf("sandboxes", Schema.Struct({
      id: IdColumn.sandbox,
      state: SandboxState,
      provider_resource: Schema.NullOr(Json(ProviderResource)),
      provisioning: IntBoolean
    }))

    const counts = rowsOf("sandboxes", Schema.Struct({ provider: Schema.NullOr(Schema.String), state: Schema.String, n: Schema.Int }))
    return {
      get: (id: SandboxId) => sandboxes.first(sql`SELECT * FROM sandboxes WHERE id = ${id}`),
      /** How many sandboxes each provider holds in each state (null provider: not placed yet). */
      countsByProviderAndState: counts.all(sql`SELECT provider, state, COUNT(*) AS n FROM sandboxes GROUP BY provider, state`),
      /** The capability snapshot of a sandbox (null before it was ready, or when there is no such sandbox). */
      capabilities: (id: SandboxId) =>
        Effect.map(capabilitiesRows.first(sql`SELECT capabilities FROM sandboxes WHERE id = ${id}`), (row) => row?.capabilities ?? null),
      /**
       * The jail reaper's question about the sandboxes jails claim to belong to: each one's state, its recorded
       * provider resource (for an emulated provider: its jail's id; null until ready), and whether a create job
       * of it is pending or running (it may still be making or finding a jail). Ids without a record are absent.
       */
      jailOwners: (sandboxIds: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          const found = new Map<string, JailOwner>()
          const unique = [...new Set(sandboxIds)]
          // In slices: SQLite bounds the number of bound values per statement.
          for (let at = 0; at < unique.length; at += 500) {
            const rows = yield* owners.all(sql`
              SELECT s.id, s.state, s.provider_resource,
                EXISTS (SELECT 1 FROM jobs j WHERE j.type = 'sandbox.provision' AND j.lock_key = 'sandbox:' || s.id
                  AND j.state IN ('pending', 'leased')) AS provisioning
              FROM sandboxes s WHERE s.id IN ${sql.in(unique.slice(at, at + 500))}`)
            for (const row of rows) found.set(row.id, { state: row.state, resourceId: row.provider_resource?.resourceId ?? null, provisioning: row.provisioning })
          }
          return found
        }),
      /**
       * Inserts a sandbox in state `routing` if its organization has credit left (a balance above 0, read in the
       * same statement); returns it as stored, or undefined when there was no credit.
       */
      insertIfFunded: (sandbox: NewSandbox) =>
        Effect.flatMap(nowIso, (now) =>
          Effect.map(
            sandboxRows.all(sql`INSERT INTO sandboxes (id, project_id, organization_id, created_by_key_id, state, requested, provider, billing_mode, created_at, updated_at, metadata)
              SELECT ${sandbox.id}, ${sandbox.projectId}, ${sandbox.organizationId}, ${sandbox.keyId}, 'routing', ${JSON.stringify(sandbox.requested)},
                      ${sandbox.provider}, 'emulated', ${now}, ${now}, ${JSON.stringify(sandbox.requested.metadata ?? {})}
              WHERE (SELECT balance_microusd FROM billing_accounts WHERE organization_id = ${sandbox.organizationId}) > 0 RETURNING *`),
            (rows) => rows[0]
          )),
      /** Sets the state (and the timestamp that goes with it) unless the row is already in one of `unless`. */
      setState: (id: SandboxId, state: SandboxState, extra: { readonly reason?: string | null; readonly unless?: ReadonlyArray<SandboxState> } = {}) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const unless = extra.unless ?? []
          const stamp = state === "ready" ? "ready_at" : state === "paused" ? "paused_at" : state === "stopped" ? "stopped_at" : null
          const updated = yield* ids.all(sql`UPDATE sandboxes SET state = ${state}, updated_at = ${now},
              state_reason = ${extra.reason === undefined ? sql`state_reason` : extra.reason}
              ${stamp === null ? sql`` : sql`, ${sql(stamp)} = ${now}`}
              ${state === "ready" || state === "resuming" ? sql`, last_activity_at = ${now}` : sql``}
            WHERE id = ${id} ${unless.length > 0 ? sql`AND state NOT IN ${sql.in(unless)}` : sql``} RETURNING id`)
          return updated.length > 0
        }),
      /** A failed pause or resume goes back to where it came from (only if still in its transitional state). */
      revertTransition: (id: SandboxId, from: SandboxState, to: SandboxState) =>
        run(sql`UPDATE sandboxes SET state = ${to} WHERE id = ${id} AND state = ${from}`),
      /** Records API activity on a sandbox (idle timeout bookkeeping). */
      touch: (id: SandboxId) => Effect.flatMap(nowIso, (now) => run(sql`UPDATE sandboxes SET last_activity_at = ${now} WHERE id = ${id}`)),
      /** Provisioned: ready with its provider resource (the row as it is now), unless destroyed meanwhile (then undefined). */
      markReady: (id: SandboxId, ready: {
        readonly provider: string
        readonly billingMode: BillingMode
        readonly resource: ProviderResource
        readonly capabilities: typeof Capabilities.Type
        readonly network: typeof ResolvedNetwork.Type
        /** The runtime deadline armed with the ready state. */
        readonly expiresAt: string
      }) =>
        Effect.gen(function*() {
          const now = yield* nowIso
          const updated = yield* sandboxRows.all(sql`UPDATE sandboxes SET state = 'ready', provider = ${ready.provider}, billing_mode = ${ready.billingMode},
              provider_resource = ${JSON.stringify(ready.resource)}, resolved_resources = ${JSON.stringify(ready.resource.resolvedResources)},
              capabilities = ${JSON.stringify(ready.capabilities)}, resolved_network = ${JSON.stringify(ready.network)}, ready_at = ${now}, last_activity_at = ${now}, updated_at = ${now},
              expires_at = ${ready.expiresAt},
              state_reason = NULL, node_id = ${ready.billingMode === "emulated" ? sql`node_id` : null}
            WHERE id = ${id} AND state IN ('routing', 'provisioning', 'provision_unknown') RETURNING *`)
          return updated[0]
        }),
      /**
       * The sandbox is being provisioned by this node: until it proves to be on a remote provider (`markReady`
       * unpins it), it lives here, on the local runtime behind this node's emulators, and its jobs run here.
       * SQLite is one node by definition: nothing is pinned (a DATA_DIR moved to another host, or a container whose
       * host name changes on restart, keeps working).
       */
      pinHere: (id: SandboxId) => dialect.engine === "pg" ? run(sql`UPDATE sandboxes SET node_id = ${node} WHERE id = ${id}`) : Effect.void,
      /** The unfinished sandboxes that live on a node. */
      liveOfNode: (nodeId: string) =>
        nodeSandboxes.all(sql`SELECT id, organization_id, project_id, provider FROM sandboxes WHERE node_id = ${nodeId} AND state NOT IN ${sql.in(ENDED)}`),
      /** Fails a sandbox whose node was lost (unless it ended meanwhile); false when it had. */
      failNodeLost: (id: SandboxId, now: string) =>
        Effect.map(
          ids.all(sql`UPDATE sandboxes SET state = 'failed', state_reason = 'node_lost', updated_at = ${now}, stopped_at = ${now}, expires_at = NULL
            WHERE id = ${id} AND state NOT IN ${sql.in(ENDED)} RETURNING id`),
          (rows) => rows.length > 0
        ),
      /** Keeps a resource created for a sandbox destroyed meanwhile, so the destroy reaches it. */
      /**
       * A create that failed on a provider: the record names where it was placed and on whose account (the
       * organization's stored credentials make it `byok`, whether the provider accepted them or not).
       */
      setPlacement: (id: SandboxId, provider: string, billingMode: BillingMode) =>
        run(sql`UPDATE sandboxes SET provider = ${provider}, billing_mode = ${billingMode} WHERE id = ${id}`),
      setProviderResource: (id: SandboxId, provider: string, resource: ProviderResource) =>
        run(sql`UPDATE sandboxes SET provider = ${provider}, provider_resource = ${JSON.stringify(resource)} WHERE id = ${id}`),
      /** The runtime deadline (`expires_at`), or null while none runs. */
      setDeadline: (id: SandboxId, at: string | null) => run(sql`UPDATE sandboxes SET expires_at = ${at} WHERE id = ${id}`),
      setCost: (id: SandboxId, amountMicrousd: bigint, now: string) =>
        run(sql`UPDATE sandboxes SET cost_microusd = ${Number(amountMicrousd)}, cost_updated_at = ${now} WHERE id = ${id}`),
      /**
       * A project's sandboxes, newest first, after the (created_at, id) position if given, only those in one of
       * `states`, on `provider` and with every metadata entry of `metadata` (when given).
       */
      page: (projectId: ProjectId, after: readonly [string, string] | undefined, limit: number, filter: SandboxFilter = {}) => {
        const conditions = [
          sql`project_id = ${projectId}`,
          ...(after === undefined ? [] : [sql`(created_at < ${after[0]} OR (created_at = ${after[0]} AND id < ${after[1]}))`]),
          ...(filter.states === undefined ? [] : [sql`state IN ${sql.in(filter.states)}`]),
          ...(filter.provider === undefined ? [] : [sql`provider = ${filter.provider}`]),
          ...Object.entries(filter.metadata ?? {}).map(([key, value]) => dialect.jsonEntryIs("metadata", key, value))
        ]
        return sandboxes.all(sql`SELECT * FROM sandboxes WHERE ${sql.and(conditions)} ORDER BY created_at DESC, id DESC LIMIT ${limit}`)
      },
      ofProject: (projectId: ProjectId) => sandboxes.all(sql`SELECT * FROM sandboxes WHERE project_id = ${projectId} ORDER BY created_at DESC, id DESC`),
      /** A sandbox of the organization or project that has not ended, if any. */
      firstLive: (of: { readonly organizationId: OrganizationId } | { readonly projectId: ProjectId }) =>
        live.first(sql`SELECT id, state FROM sandboxes WHERE ${"organizationId" in of ? sql`organization_id = ${of.organizationId}` : sql`project_id = ${of.projectId}`}
          AND state NOT IN ${sql.in(ENDED)} LIMIT 1`),
      /** An organization's sandboxes billed against its balance (managed and emulated) in one of `states`. */
      billedIn: (organizationId: OrganizationId, states: ReadonlyArray<SandboxState>) =>
        sandboxes.all(sql`SELECT * FROM sandboxes WHERE organization_id = ${organizationId}
          AND billing_mode IN ('managed', 'emulated') AND state IN ${sql.in(states)}`),
      recordAttempt: (attempt: Attempt) =>
        Effect.flatMap(nowIso, (now) =>
          run(sql`INSERT INTO provider_attempts (id, sandbox_id, operation_id, attempt_index, provider, outcome, code, message, unmet_requirements, created_at)
            VALUES (${newUuid()}, ${attempt.sandboxId}, ${attempt.operationId}, ${attempt.attemptIndex}, ${attempt.provider}, ${attempt.outcome},
                    ${attempt.code}, ${attempt.message}, ${JSON.stringify(attempt.unmetRequirements)}, ${now})`))
    }
  })
}) {}
