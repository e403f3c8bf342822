/** Usage records, `usage_records`: one row per change of a sandbox's cumulative cost (reference §7). */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { newUuid, type OrganizationId, type ProjectId, type SandboxId } from "../../domain/Ids.ts"
import { Dialect } from "../Dialect.ts"
import { IdColumn, MicroUsd, rowsOf, run } from "../Rows.ts"

export const UsageRow = Schema.Struct({
  sandbox_id: IdColumn.sandbox,
  project_id: IdColumn.project,
  provider: Schema.String,
  billing_mode: Schema.String,
  cost_delta_microusd: MicroUsd,
  cumulative_microusd: MicroUsd,
  provenance: Schema.String,
  confidence: Schema.String,
  rate_card_version: Schema.NullOr(Schema.String),
  measured_through: Schema.String
})
export type UsageRow = typeof UsageRow.Type

export interface UsageFilter {
  /** Records measured after `after` and up to `through`. */
  readonly after: string
  readonly through: string
  readonly projectId?: ProjectId | undefined
  readonly provider?: string | undefined
  readonly sandboxId?: SandboxId | undefined
  /** "all" for every mode. */
  readonly billingMode: string
}

export interface NewUsageRecord {
  readonly organizationId: OrganizationId
  readonly projectId: ProjectId
  readonly sandboxId: SandboxId
  readonly provider: string
  readonly billingMode: string
  readonly deltaMicrousd: bigint
  readonly cumulativeMicrousd: bigint
  readonly provenance: string
  readonly confidence: string
  readonly rateCardVersion: string | null
  readonly measuredThrough: string
  readonly now: string
}

export class UsageRepo extends Effect.Service<UsageRepo>()("app/db/UsageRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    const usage = rowsOf("usage_records", UsageRow)
    const cumulative = rowsOf("usage_records", Schema.Struct({ cumulative_microusd: MicroUsd }))
    return {
      /** An organization's records in a window, oldest first. */
      inWindow: (organizationId: OrganizationId, filter: UsageFilter) =>
        usage.all(sql`SELECT sandbox_id, project_id, provider, billing_mode, cost_delta_microusd, cumulative_microusd,
            provenance, confidence, rate_card_version, measured_through
          FROM usage_records WHERE organization_id = ${organizationId}
            AND measured_through > ${filter.after} AND measured_through <= ${filter.through}
            ${filter.projectId !== undefined ? sql`AND project_id = ${filter.projectId}` : sql``}
            ${filter.provider !== undefined ? sql`AND provider = ${filter.provider}` : sql``}
            ${filter.sandboxId !== undefined ? sql`AND sandbox_id = ${filter.sandboxId}` : sql``}
            ${filter.billingMode !== "all" ? sql`AND billing_mode = ${filter.billingMode}` : sql``}
          ORDER BY measured_through`),
      /**
       * Holds the sandbox's usage until the transaction ends: two processes syncing one sandbox's cost read its last
       * cumulative and record the difference one after the other, so the difference is charged once.
       */
      lockSandbox: (sandboxId: SandboxId) => Effect.orDie(dialect.lockKey(`usage:${sandboxId}`)),
      /** The sandbox's cumulative cost as last recorded (0 before the first record). */
      lastCumulative: (sandboxId: SandboxId) =>
        Effect.map(cumulative.first(sql`SELECT cumulative_microusd FROM usage_records
          WHERE sandbox_id = ${sandboxId} ORDER BY measured_through DESC, ${dialect.rowId} DESC LIMIT 1`), (row) => row?.cumulative_microusd ?? 0n),
      /** Inserts a record; returns its id (the ledger entry that charges it references it). */
      insert: (record: NewUsageRecord) =>
        Effect.gen(function*() {
          const id = newUuid()
          yield* run(sql`INSERT INTO usage_records (id, organization_id, project_id, sandbox_id, provider, billing_mode, cost_delta_microusd,
              cumulative_microusd, provenance, confidence, rate_card_version, measured_through, created_at)
            VALUES (${id}, ${record.organizationId}, ${record.projectId}, ${record.sandboxId}, ${record.provider}, ${record.billingMode},
                    ${Number(record.deltaMicrousd)}, ${Number(record.cumulativeMicrousd)}, ${record.provenance}, ${record.confidence},
                    ${record.rateCardVersion}, ${record.measuredThrough}, ${record.now})`)
          return id
        })
    }
  })
}) {}
