/**
 * Idempotency records, `idempotency_keys` (reference §4): only hashes of the key and of the request, and the
 * encoded response. Reservation and completion are the dialect's (src/db/Dialect.ts §5): they are what makes
 * concurrent requests with one key create one resource.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Dialect, type IdempotencyKeyRef } from "../Dialect.ts"

export class IdempotencyRepo extends Effect.Service<IdempotencyRepo>()("app/db/IdempotencyRepo", {
  accessors: true,
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = yield* Dialect
    return {
      /** Call inside the transaction of the request's work. */
      reserve: (ref: IdempotencyKeyRef, at: { readonly now: string; readonly fingerprint: string; readonly expiresAt: string }) =>
        Effect.orDie(dialect.reserveIdempotencyKey(ref, at)),
      complete: (ref: IdempotencyKeyRef, stored: { readonly fingerprint: string; readonly status: number; readonly body: string; readonly now: string; readonly expiresAt: string }) =>
        Effect.orDie(dialect.completeIdempotencyKey(ref, stored)),
      /** Removes up to `limit` records expired before `now`; returns how many went. */
      deleteExpired: (now: string, limit: number) =>
        Effect.map(
          sql`DELETE FROM idempotency_keys WHERE ${dialect.rowId} IN (
            SELECT ${dialect.rowId} FROM idempotency_keys WHERE expires_at < ${now} LIMIT ${limit}) RETURNING 1`.pipe(Effect.orDie),
          (rows) => rows.length
        )
    }
  })
}) {}
