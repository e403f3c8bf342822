/**
 * Transactions, for services that compose several repository calls into one atomic unit. A repository call run
 * inside `transaction` joins it (the client finds the transaction's connection in the fiber's context). SQL
 * failures become defects (→ 500, or 503 `database_busy` when the engine says busy); the unit is rolled back.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Effect, Option } from "effect"
import { SIGNALS_CHANNEL } from "./PgDialect.ts"
import { takeSqliteWriteLock } from "./SqliteDialect.ts"

export class Db extends Effect.Service<Db>()("app/db/Db", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const listeners = new Set<() => void>()
    /**
     * SQLite: the transaction takes the write lock first (SqliteDialect.ts `takeSqliteWriteLock`; @effect/sql begins
     * with a plain BEGIN). A deferred transaction that read before another process (the CLI on a live server)
     * committed cannot write afterwards: SQLite refuses at once, and the request was answered 503 `database_busy`.
     * The process's own transactions are serialised on its one connection anyway, so this costs them nothing; on a
     * savepoint (a nested transaction) the lock is already held.
     */
    const takeWriteLock: Effect.Effect<void, SqlError.SqlError> = sql.onDialectOrElse({
      sqlite: () => takeSqliteWriteLock(sql),
      orElse: () => Effect.void
    })
    const committed = Effect.sync(() => {
      for (const listener of listeners) listener()
    })
    const begin = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      sql.withTransaction(Effect.zipRight(takeWriteLock, effect)).pipe(Effect.catchTag("SqlError", Effect.die), Effect.tap(() => committed))
    return {
      /**
       * Inside a transaction already, `effect` simply joins it: @effect/sql would open a savepoint (a round trip on
       * PostgreSQL) only to roll back to it on a failure, and nothing here catches a failure inside a transaction
       * to carry on with it — a failure fails the whole unit.
       */
      transaction: <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
        Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (open) => (Option.isSome(open) ? effect : begin(effect))),
      /**
       * Calls `listener` after each `transaction` that committed (not one that joined another: it has not
       * committed yet); a listener takes it as a hint to look. The live event feed uses it to notice commits at once.
       */
      onCommit: (listener: () => void) =>
        Effect.sync(() => {
          listeners.add(listener)
          return Effect.sync(() => void listeners.delete(listener))
        }),
      /**
       * Tells the other processes on this database that `topic` has news (a process's output, an operation's
       * events): on PostgreSQL a NOTIFY on SIGNALS_CHANNEL, delivered when the current transaction commits, which
       * each replica's event tail turns into a local signal (src/db/EventTail.ts). SQLite: nothing (one node;
       * another process's writes are found by the followers' own polls).
       */
      announce: (topic: string) =>
        sql.onDialectOrElse({
          pg: () => sql`SELECT pg_notify(${SIGNALS_CHANNEL}, ${topic})`.pipe(Effect.asVoid, Effect.orDie),
          orElse: () => Effect.void
        }),
      /** Whether the database answers (GET /ready). */
      ping: sql`SELECT 1 AS ok`.pipe(Effect.asVoid)
    }
  })
}) {}

/** Runs `effect` in one transaction (nested calls join the outer one). */
export const inTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R | Db> =>
  Effect.flatMap(Db, (db) => db.transaction(effect))
