/**
 * Transactions, for services that compose several repository calls into one atomic unit. A repository call run
 * inside `transaction` joins it (the client finds the transaction's connection in the fiber's context). SQL
 * failures become defects (→ 500, or 503 `database_busy` when the engine says busy); the unit is rolled back.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export class Db extends Effect.Service<Db>()("app/db/Db", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const listeners = new Set<() => void>()
    const committed = Effect.sync(() => {
      for (const listener of listeners) listener()
    })
    return {
      transaction: <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
        sql.withTransaction(effect).pipe(Effect.catchTag("SqlError", Effect.die), Effect.tap(() => committed)),
      /**
       * Calls `listener` after each `transaction` that succeeded (a nested one too, which has not committed yet:
       * a listener must only take it as a hint to look). The live event feed uses it to notice commits at once.
       */
      onCommit: (listener: () => void) =>
        Effect.sync(() => {
          listeners.add(listener)
          return Effect.sync(() => void listeners.delete(listener))
        }),
      /** Whether the database answers (GET /ready). */
      ping: sql`SELECT 1 AS ok`.pipe(Effect.asVoid)
    }
  })
}) {}

/** Runs `effect` in one transaction (nested calls join the outer one). */
export const inTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R | Db> =>
  Effect.flatMap(Db, (db) => db.transaction(effect))
