/**
 * Organizations: listed and read by their members (a pending invitation of the caller's email is accepted first),
 * created by any user, renamed by managers, deleted by owners; creating and deleting are each one unit, run in one
 * transaction by the caller or here.
 */
import { Effect } from "effect"
import { inTransaction } from "../db/Db.ts"
import { BillingRepo } from "../db/repos/Billing.ts"
import { OrganizationsRepo } from "../db/repos/Organizations.ts"
import { SandboxesRepo } from "../db/repos/Sandboxes.ts"
import type { UpdateOrganization } from "../domain/Accounts.ts"
import { apiError, conflict, notFound, Unprocessable } from "../domain/Errors.ts"
import { CurrentUser, MANAGERS } from "../domain/Principals.ts"
import { requireOrgRole } from "./Access.ts"
import { appendEvent } from "./Events.ts"
import { grantWelcomeCredit } from "./Ledger.ts"
import { accessChanged } from "./LiveStreams.ts"
import type { OrganizationId, UserId } from "../domain/Ids.ts"

/** The caller's organizations (invitations to their email accepted first). */
export const listOrganizations = Effect.gen(function*() {
  const user = yield* CurrentUser
  yield* OrganizationsRepo.acceptInvitationsFor(user.userId, user.email)
  return yield* OrganizationsRepo.ofUser(user.userId)
})

export const getOrganization = (organizationId: OrganizationId) =>
  Effect.gen(function*() {
    const user = yield* CurrentUser
    yield* OrganizationsRepo.acceptInvitationsFor(user.userId, user.email)
    yield* requireOrgRole(organizationId)
    return (yield* OrganizationsRepo.get(organizationId))!
  })

/**
 * A user's new organization (the caller runs it inside the idempotency reservation): its owner, billing account
 * and event, and the welcome credit if it is the first organization the user creates (once per user).
 */
export const newOrganization = (input: { readonly name: string; readonly slug: string }) =>
  Effect.gen(function*() {
    const user = yield* CurrentUser
    const row = yield* createOrganization({ name: input.name.trim(), slug: input.slug, ownerId: user.userId })
    yield* grantWelcomeCredit(user.userId, row.id)
    yield* appendEvent({ type: "organization.created", organizationId: row.id, data: { organization_id: row.id, name: row.name } })
    return row
  }).pipe(Effect.withSpan("Organizations.newOrganization"))

export const updateOrganization = (organizationId: OrganizationId, input: typeof UpdateOrganization.Type) =>
  inTransaction(Effect.gen(function*() {
    yield* requireOrgRole(organizationId, MANAGERS)
    const row = yield* OrganizationsRepo.update(organizationId, { name: input.name.trim(), slug: input.slug })
    yield* appendEvent({ type: "organization.updated", organizationId: row.id, data: { organization_id: row.id, name: row.name, slug: row.slug } })
    return row
  })).pipe(Effect.withSpan("Organizations.updateOrganization", { attributes: { "organization.id": organizationId } }))

/** An owner's delete (deleteOrganization); its projects' streams end too. */
export const deleteOwnedOrganization = (organizationId: OrganizationId, confirm: Parameters<typeof deleteOrganization>[1]) =>
  Effect.gen(function*() {
    yield* requireOrgRole(organizationId, ["owner"])
    return yield* deleteOrganization(organizationId, confirm)
  }).pipe(Effect.tap(() => accessChanged))

/** An organization with its creator as owner and its billing account; 409 when the slug is taken. */
export const createOrganization = (input: { readonly name: string; readonly slug: string; readonly ownerId: UserId }) =>
  Effect.gen(function*() {
    const row = yield* OrganizationsRepo.insert(input)
    yield* BillingRepo.ensureAccount(row.id)
    return row
  }).pipe(Effect.withSpan("Organizations.createOrganization"))

/**
 * Deletes an organization (reference §6), in one transaction: refused while a sandbox is live, a purchase is
 * pending, or credit is left that the caller did not agree to forfeit; then the cascade and its event.
 */
export const deleteOrganization = (organizationId: OrganizationId, confirm: { readonly confirm_name: string; readonly confirm_forfeit_balance: boolean }) =>
  inTransaction(Effect.gen(function*() {
    const org = yield* OrganizationsRepo.get(organizationId)
    if (org === undefined) return yield* notFound("Organization")
    if (confirm.confirm_name !== org.name) {
      return yield* apiError(Unprocessable, "confirmation_mismatch", "confirm_name must equal the organization's name exactly", { issues: [{ path: "confirm_name", message: "does not match the organization's name" }] })
    }
    const live = yield* SandboxesRepo.firstLive({ organizationId })
    if (live !== undefined) {
      return yield* conflict("organization_has_active_resources", "Destroy the organization's sandboxes first", { resource: "sandbox", id: live.id, state: live.state })
    }
    const pending = yield* BillingRepo.firstPendingPurchase(organizationId)
    if (pending !== undefined) return yield* conflict("organization_has_pending_billing", "A purchase is still pending", { purchase_id: pending })
    const balance = (yield* BillingRepo.balance(organizationId)) ?? 0n
    if (balance > 0n && !confirm.confirm_forfeit_balance) {
      return yield* conflict("organization_has_credit_balance", "The organization still has credit; set confirm_forfeit_balance to forfeit it", {
        balance_microusd: String(balance)
      })
    }
    yield* OrganizationsRepo.deleteCascade(organizationId)
    yield* appendEvent({ type: "organization.deleted", organizationId, data: { organization_id: organizationId } })
    return { id: organizationId, deleted: true as const }
  })).pipe(Effect.withSpan("Organizations.deleteOrganization", { attributes: { "organization.id": organizationId } }))
