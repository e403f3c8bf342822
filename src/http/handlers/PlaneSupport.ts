/**
 * What the sandbox-plane handler groups share: the key's caller, the 202 answer with a Location, list positions,
 * and their context (repositories, idempotency, the runner). Mutations write rows + job in one transaction
 * (through IdempotencyStore where the route takes a key), wake the runner after commit, and answer 202 with the
 * record to poll.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect, Schema } from "effect"
import { repositories } from "../../db/Database.ts"
import { Db } from "../../db/Db.ts"
import { CurrentProjectKey } from "../../domain/Principals.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { OperationRunner } from "../../services/OperationRunner.ts"
import type { Caller } from "../../services/sandboxes/Commands.ts"

/** Newest-first lists page by (created_at, id); a cursor carrying anything else is a 422. */
export const ListPosition = Schema.Tuple(Schema.String, Schema.String)

/** The caller of a key-authenticated route. */
export const keyCaller = Effect.map(CurrentProjectKey, (k): Caller => ({ projectId: k.projectId, organizationId: k.organizationId, keyId: k.keyId }))

export const accepted = <A, I>(schema: Schema.Schema<A, I>, body: A, location: string) =>
  HttpServerResponse.schemaJson(schema)(body, { status: 202, headers: { location } }).pipe(Effect.orDie)

/** The repositories (provided to each handler), a transaction, idempotency and the runner. */
export const planeContext = Effect.gen(function*() {
  const db = yield* Db
  const idempotency = yield* IdempotencyStore
  const runner = yield* OperationRunner
  const context = yield* repositories
  const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, context)
  return { idempotency, runner, provide, tx: db.transaction }
})
