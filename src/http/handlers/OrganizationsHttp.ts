import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Organization } from "../../domain/Accounts.ts"
import { CurrentUser } from "../../domain/Principals.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { deleteOwnedOrganization, getOrganization, listOrganizations, newOrganization, updateOrganization } from "../../services/Organizations.ts"
import { provideServiceContext } from "../../services/ServiceContext.ts"
import { Api } from "../Api.ts"
import { organizationToWire } from "../wire/Accounts.ts"

export const OrganizationsLive = HttpApiBuilder.group(Api, "organizations", (handlers) =>
  Effect.gen(function*() {
    const idempotency = yield* IdempotencyStore
    const provide = yield* provideServiceContext

    return handlers
      .handle("list", () => listOrganizations.pipe(Effect.map((rows) => ({ organizations: rows.map(organizationToWire) })), provide))
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
            run: Effect.map(newOrganization(payload), organizationToWire)
          })
        }).pipe(provide))
      .handle("get", ({ path }) => getOrganization(path.organization_id).pipe(Effect.map(organizationToWire), provide))
      .handle("update", ({ path, payload }) => updateOrganization(path.organization_id, payload).pipe(Effect.map(organizationToWire), provide))
      .handle("delete", ({ path, payload }) => deleteOwnedOrganization(path.organization_id, payload).pipe(provide))
  }))
