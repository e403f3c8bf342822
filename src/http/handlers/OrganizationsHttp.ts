import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Db } from "../../db/Db.ts"
import { provideRepositories } from "../../db/Database.ts"
import { OrganizationsRepo } from "../../db/repos/Organizations.ts"
import { Organization } from "../../domain/Accounts.ts"
import { CurrentUser, MANAGERS } from "../../domain/Principals.ts"
import { requireOrgRole } from "../../services/Access.ts"
import { appendEvent } from "../../services/Events.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { accessChanged } from "../../services/LiveStreams.ts"
import { grantWelcomeCredit } from "../../services/Ledger.ts"
import { createOrganization, deleteOrganization } from "../../services/Organizations.ts"
import { Api } from "../Api.ts"
import { organizationToWire } from "../wire/Accounts.ts"

export const OrganizationsLive = HttpApiBuilder.group(Api, "organizations", (handlers) =>
  Effect.gen(function*() {
    const idempotency = yield* IdempotencyStore
    const db = yield* Db
    const provide = yield* provideRepositories

    return handlers
      .handle("list", () =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          yield* OrganizationsRepo.acceptInvitationsFor(user.userId, user.email)
          const rows = yield* OrganizationsRepo.ofUser(user.userId)
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
              const row = yield* createOrganization({ name: payload.name.trim(), slug: payload.slug, ownerId: user.userId })
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
          yield* OrganizationsRepo.acceptInvitationsFor(user.userId, user.email)
          yield* requireOrgRole(path.organization_id)
          return organizationToWire((yield* OrganizationsRepo.get(path.organization_id))!)
        }).pipe(provide))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, MANAGERS)
          const row = yield* OrganizationsRepo.update(path.organization_id, { name: payload.name.trim(), slug: payload.slug })
          yield* appendEvent({ type: "organization.updated", organizationId: row.id, data: { organization_id: row.id, name: row.name, slug: row.slug } })
          return organizationToWire(row)
        }).pipe(db.transaction, provide))
      .handle("delete", ({ path, payload }) =>
        Effect.gen(function*() {
          yield* requireOrgRole(path.organization_id, ["owner"])
          return yield* deleteOrganization(path.organization_id, payload)
        }).pipe(Effect.tap(() => accessChanged), provide)) // its projects' streams end too
  }))
