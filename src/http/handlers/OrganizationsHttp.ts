import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Organization } from "../../domain/Accounts.ts"
import { conflict, Unprocessable } from "../../domain/Errors.ts"
import { nowIso } from "../../domain/Time.ts"
import { acceptInvitationsFor, getOrganization, insertOrganization, organizationsOfUser, organizationToWire, updateOrganization } from "../../db/repos/Organizations.ts"
import { requireOrgRole } from "../../services/Access.ts"
import { MANAGERS } from "../../domain/Principals.ts"
import { appendEvent } from "../../services/Events.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { grantWelcomeCredit } from "../../services/Ledger.ts"
import { Api } from "../Api.ts"
import { CurrentUser } from "../../domain/Principals.ts"

export const OrganizationsLive = HttpApiBuilder.group(Api, "organizations", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const idempotency = yield* IdempotencyStore
    const provide = Effect.provideService(SqlClient.SqlClient, sql)

    return handlers
      .handle("list", () =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          yield* acceptInvitationsFor(user.userId, user.email)
          const rows = yield* organizationsOfUser(user.userId)
          return { organizations: rows.map(organizationToWire) }
        }).pipe(provide))
      .handle("create", ({ headers, payload }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          return yield* idempotency.remember({
            principalId: user.userId,
            scope: "organizations.create",
            key: headers["idempotency-key"],
            required: false,
            request: payload,
            schema: Organization,
            run: Effect.gen(function*() {
              const row = yield* insertOrganization({ name: payload.name.trim(), slug: payload.slug, ownerId: user.userId })
              // The welcome credit goes to the first organization a user creates (once per user).
              yield* grantWelcomeCredit(user.userId, row.id)
              yield* appendEvent({ type: "organization.created", organizationId: row.id, data: { organization_id: row.id, name: row.name } })
              return organizationToWire(row)
            })
          })
        }).pipe(provide))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          yield* acceptInvitationsFor(user.userId, user.email)
          yield* requireOrgRole(path.organization_id)
          return organizationToWire((yield* getOrganization(path.organization_id))!)
        }).pipe(provide))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* updateOrganization(path.organization_id, { name: payload.name.trim(), slug: payload.slug })
          yield* appendEvent({ type: "organization.updated", organizationId: row.id, data: { organization_id: row.id, name: row.name, slug: row.slug } })
          return organizationToWire(row)
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die), provide))
      .handle("delete", ({ path, payload }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, ["owner"])
          const org = (yield* getOrganization(path.organization_id))!
          if (payload.confirm_name !== org.name) {
            return yield* new Unprocessable({
              code: "confirmation_mismatch",
              message: "confirm_name must equal the organization's name exactly",
              details: { issues: [{ path: "confirm_name", message: "does not match the organization's name" }] }
            })
          }
          const live = yield* sql<{ id: string; state: string }>`SELECT id, state FROM sandboxes WHERE organization_id = ${org.id}
            AND state NOT IN ('stopped', 'failed', 'cleanup_failed') LIMIT 1`
          if (live[0] !== undefined) {
            return yield* conflict("organization_has_active_resources", "Destroy the organization's sandboxes first", {
              resource: "sandbox",
              id: live[0].id,
              state: live[0].state
            })
          }
          const pending = yield* sql<{ id: string }>`SELECT id FROM purchases WHERE organization_id = ${org.id} AND status IN ('pending', 'requires_action') LIMIT 1`
          if (pending[0] !== undefined) {
            return yield* conflict("organization_has_pending_billing", "A purchase is still pending", { purchase_id: pending[0].id })
          }
          const balance = (yield* sql<{ balance_microusd: number }>`SELECT balance_microusd FROM billing_accounts WHERE organization_id = ${org.id}`)[0]?.balance_microusd ?? 0
          if (balance > 0 && !payload.confirm_forfeit_balance) {
            return yield* conflict("organization_has_credit_balance", "The organization still has credit; set confirm_forfeit_balance to forfeit it", {
              balance_microusd: String(balance)
            })
          }
          const now = yield* nowIso
          yield* sql`UPDATE projects SET deleted_at = ${now} WHERE organization_id = ${org.id} AND deleted_at IS NULL`
          yield* sql`UPDATE invitations SET status = 'revoked', revoked_at = ${now} WHERE organization_id = ${org.id} AND status = 'pending'`
          yield* sql`DELETE FROM memberships WHERE organization_id = ${org.id}`
          yield* sql`UPDATE webhooks SET deleted_at = ${now}, disabled_at = COALESCE(disabled_at, ${now}) WHERE organization_id = ${org.id} AND deleted_at IS NULL`
          yield* sql`UPDATE organizations SET name = 'Deleted organization', slug = ${`deleted-${org.id}`}, deleted_at = ${now}, updated_at = ${now} WHERE id = ${org.id}`
          yield* appendEvent({ type: "organization.deleted", organizationId: org.id, data: { organization_id: org.id } })
          return { id: org.id, deleted: true as const }
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die), provide))
  }))
