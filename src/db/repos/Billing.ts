/** Billing accounts, purchases and the credit ledger. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { nowIso } from "../../domain/Time.ts"

/** Creates the billing account row if it is missing. */
export const ensureBillingAccount = (organizationId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* nowIso
    yield* sql`INSERT INTO billing_accounts (organization_id, updated_at) VALUES (${organizationId}, ${now})
      ON CONFLICT (organization_id) DO NOTHING`
  }).pipe(Effect.orDie)
