/**
 * Idempotency (reference/openmetal-api.md §4). Scope = principal + route + parent; only SHA-256 of the key is
 * stored, with SHA-256 of the decoded request (defaults applied) as fingerprint and the encoded response.
 *
 * The business work runs in the same transaction as the key's reservation (src/db/Dialect.ts §5), so concurrent
 * requests with one key create one resource: the later ones replay the first one's stored response. A failure
 * rolls everything back, so failures are never cached.
 * Work inside `run` must be database-only (never a provider call); wake background workers after it returns.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { Db } from "../db/Db.ts"
import { IdempotencyRepo } from "../db/repos/Idempotency.ts"
import { type BadRequest, type Coded, type Conflict, badRequest, conflict } from "../domain/Errors.ts"
import { isoAfter, nowIso } from "../domain/Time.ts"
import { sha256Hex } from "../domain/Tokens.ts"

const RETENTION_SECONDS = 24 * 3600

/** What remembering can fail with besides the work's own failure. */
export type IdempotencyFailure = Coded<Conflict, "idempotency_mismatch" | "idempotency_in_progress"> | Coded<BadRequest, "idempotency_key_required">

export interface RememberOptions<A, I, E, R> {
  readonly principalId: string
  /** The route and its parent, e.g. `projects.create:<org id>`. */
  readonly scope: string
  readonly key: string | undefined
  /** When true a missing key is 400 `idempotency_key_required`. */
  readonly required: boolean
  /** The decoded request (defaults applied); `null` for bodiless routes. */
  readonly request: unknown
  readonly schema: Schema.Schema<A, I>
  readonly run: Effect.Effect<A, E, R>
}

export interface IdempotencyStoreShape {
  readonly remember: <A, I, E, R>(options: RememberOptions<A, I, E, R>) => Effect.Effect<A, E | IdempotencyFailure, R>
}

export class IdempotencyStore extends Context.Tag("app/IdempotencyStore")<IdempotencyStore, IdempotencyStoreShape>() {}

/** Stable JSON: object keys sorted, so equal requests fingerprint equally whatever the key order. */
export const canonicalJson = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : typeof v === "bigint"
      ? v.toString()
      : v)

export const IdempotencyStoreLive = Layer.effect(
  IdempotencyStore,
  Effect.gen(function*() {
    const db = yield* Db
    const keys = yield* IdempotencyRepo

    const remember = <A, I, E, R>(options: RememberOptions<A, I, E, R>) => {
      if (options.key === undefined) {
        if (options.required) {
          return Effect.fail(badRequest("idempotency_key_required", "This request requires an Idempotency-Key header"))
        }
        return db.transaction(options.run)
      }
      const ref = { principalId: options.principalId, scope: options.scope, keyHash: sha256Hex(options.key) }
      const fingerprint = sha256Hex(canonicalJson(options.request ?? null))
      const encode = Schema.encode(options.schema)
      const decode = Schema.decodeUnknown(Schema.parseJson(options.schema))
      return Effect.gen(function*() {
        const now = yield* nowIso
        const expiresAt = isoAfter(now, RETENTION_SECONDS)
        const reservation = yield* keys.reserve(ref, { now, fingerprint, expiresAt })
        if (reservation._tag === "Existing") {
          if (reservation.fingerprint !== fingerprint) {
            return yield* conflict("idempotency_mismatch", "This Idempotency-Key was used with a different request")
          }
          if (reservation.responseBody === null) {
            return yield* conflict("idempotency_in_progress", "A request with this Idempotency-Key is still in progress")
          }
          return yield* Effect.orDie(decode(reservation.responseBody))
        }
        const result = yield* options.run
        const body = JSON.stringify(yield* Effect.orDie(encode(result)))
        yield* keys.complete(ref, { fingerprint, status: 200, body, now, expiresAt })
        return result
      }).pipe(db.transaction)
    }

    return { remember }
  })
)
