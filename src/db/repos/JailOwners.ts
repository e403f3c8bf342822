/** What the jail reaper needs to know about the sandboxes that jails claim to belong to. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export interface JailOwner {
  readonly state: string
  /** The provider resource recorded for the sandbox (for emulated providers: its jail's id), null until ready. */
  readonly resourceId: string | null
  /** A create (provision) job of the sandbox is pending or running: it may still be making or finding a jail. */
  readonly provisioning: boolean
}

const resourceIdOf = (json: string | null): string | null => {
  if (json === null) return null
  try {
    const id = (JSON.parse(json) as { resourceId?: unknown }).resourceId
    return typeof id === "string" ? id : null
  } catch {
    return null
  }
}

/** The owners among `sandboxIds` that have a record (a missing id has none). */
export const jailOwners = (sandboxIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const owners = new Map<string, JailOwner>()
    if (sandboxIds.length === 0) return owners
    const sql = yield* SqlClient.SqlClient
    const ids = [...new Set(sandboxIds)]
    // In slices: SQLite bounds the number of bound values per statement.
    for (let at = 0; at < ids.length; at += 500) {
      const rows = yield* sql<{ id: string; state: string; provider_resource: string | null; provisioning: number }>`
        SELECT s.id, s.state, s.provider_resource,
          EXISTS (SELECT 1 FROM jobs j WHERE j.type = 'sandbox.provision' AND j.lock_key = 'sandbox:' || s.id
            AND j.state IN ('pending', 'leased')) AS provisioning
        FROM sandboxes s WHERE s.id IN ${sql.in(ids.slice(at, at + 500))}`
      for (const row of rows) owners.set(row.id, { state: row.state, resourceId: resourceIdOf(row.provider_resource), provisioning: row.provisioning === 1 })
    }
    return owners
  }).pipe(Effect.orDie)
