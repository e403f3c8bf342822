/**
 * Organizations' own provider accounts (BYOK, reference §2 "Provider credentials"). An organization that stored
 * credentials for a provider gets its sandboxes there created on its own account (`billing_mode: "byok"`: usage
 * is recorded, nothing is charged to its balance), and every later call for those sandboxes runs on the
 * credential as stored at that moment: a rotated credential takes effect at the next call, a removed one makes
 * the next call fail as the organization's `auth` failure (never the gateway's account instead). The registry
 * builds and caches one adapter instance per credential set; credentials are opened here, only for the call,
 * and never reach logs, errors, events or operation records.
 */
import { Effect, Schema } from "effect"
import { ProviderCredentialsRepo } from "../db/repos/ProviderCredentials.ts"
import type { SandboxRow } from "../db/repos/Sandboxes.ts"
import { StoredCredentialFields } from "../domain/ProviderCredentials.ts"
import { type ProviderName, ProviderError, ProviderRegistry, type ProviderSandbox, type SandboxProvider } from "../providers/Provider.ts"
import { aroundCalls } from "../providers/registry.ts"
import { SecretBox } from "./Crypto.ts"
import type { OrganizationId } from "../domain/Ids.ts"

/** A sealed credential that does not decode is a defect (it was written by this gateway), never a cast. */
const decodeFields = Schema.decodeUnknownSync(StoredCredentialFields)

/** The providers a sandbox of an organization may go to (its own accounts first), and which are its own. */
export interface Candidates {
  readonly providers: ReadonlyArray<SandboxProvider>
  readonly byok: ReadonlySet<ProviderName>
}

export interface ProviderTarget {
  readonly provider: SandboxProvider
  readonly resource: ProviderSandbox
  readonly sandbox: SandboxRow
}

export class ProviderAccounts extends Effect.Service<ProviderAccounts>()("app/ProviderAccounts", {
  effect: Effect.gen(function*() {
    const registry = yield* ProviderRegistry
    const credentials = yield* ProviderCredentialsRepo
    const box = yield* SecretBox

    const missing = (provider: ProviderName) =>
      new ProviderError({ provider, kind: "auth", message: `the organization has no stored ${provider} credentials`, retryable: false, account: "organization" })

    /** The provider on the organization's account, its credential read at each call. */
    const onAccountOf = (provider: SandboxProvider, organizationId: OrganizationId): SandboxProvider => {
      const instance = Effect.flatMap(credentials.live(organizationId, provider.name), (row) => {
        const own = row === undefined ? undefined : registry.withCredentials(provider.name, decodeFields(box.open(row.ciphertext)))
        return own === undefined ? Effect.fail(missing(provider.name)) : Effect.succeed(own)
      })
      return aroundCalls(provider, (_name, call) => Effect.flatMap(instance, call))
    }

    return {
      /** Every configured provider (the gateway's own), in the canonical order. */
      configured: registry.all,
      /**
       * The providers a new sandbox of the organization may be created on: those it has its own account for
       * first (BYOK, in the registry's order), then the gateway's. `byok` names the first kind.
       */
      candidates: (organizationId: OrganizationId): Effect.Effect<Candidates> =>
        Effect.map(credentials.ofOrganization(organizationId), (rows) => {
          const stored = new Set(rows.map((row) => row.provider))
          const own = registry.all.filter((p) => stored.has(p.name) && p.withCredentials !== undefined)
          const byok = new Set<ProviderName>(own.map((p) => p.name))
          return { providers: [...own.map((p) => onAccountOf(p, organizationId)), ...registry.all.filter((p) => !byok.has(p.name))], byok }
        }),

      /** The provider serving a sandbox and its resource there (on the organization's account when BYOK), if any. */
      target: (sandbox: SandboxRow | undefined): ProviderTarget | undefined => {
        if (sandbox?.provider == null || sandbox.provider_resource === null) return undefined
        const provider = registry.get(sandbox.provider)
        if (provider === undefined) return undefined
        return { provider: sandbox.billing_mode === "byok" ? onAccountOf(provider, sandbox.organization_id) : provider, resource: sandbox.provider_resource, sandbox }
      }
    }
  })
}) {}
