/**
 * Rows are decoded by Schema, never cast: a repository declares the Schema of each row it reads (JSON columns
 * with `Json`, 0/1 columns with `IntBoolean`, money with `MicroUsd`), and a row that does not decode is a
 * `MalformedRow` — a typed error raised as a defect at the repository boundary (→ 500 `internal_error`, logged),
 * like any other failure of the database itself.
 */
import type { SqlError } from "@effect/sql"
import { Data, Effect, ParseResult, Schema } from "effect"

export class MalformedRow extends Data.TaggedError("MalformedRow")<{
  readonly table: string
  readonly message: string
}> {}

/** A JSON text column holding a value of `schema`. */
export const Json = <A, I, R>(schema: Schema.Schema<A, I, R>) => Schema.parseJson(schema)

/** A 0/1 integer column as a boolean. */
export const IntBoolean = Schema.transform(Schema.Literal(0, 1), Schema.Boolean, {
  strict: true,
  decode: (n) => n === 1,
  encode: (b) => (b ? 1 : 0)
})

/** Integer micro-USD as a bigint. */
export const MicroUsd = Schema.BigIntFromNumber

/** Decoders of `schema` rows from `table`: every row, the first, or one already fetched. */
export const rowsOf = <A, I>(table: string, schema: Schema.Schema<A, I>) => {
  const decodeAll = Schema.decodeUnknownEither(Schema.Array(schema))
  const decodeOne = Schema.decodeUnknownEither(schema)
  const malformed = (e: ParseResult.ParseError) => new MalformedRow({ table, message: ParseResult.TreeFormatter.formatErrorSync(e) })
  const all = (query: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>): Effect.Effect<ReadonlyArray<A>> =>
    Effect.flatMap(Effect.orDie(query), (rows) => {
      const decoded = decodeAll(rows)
      return decoded._tag === "Right" ? Effect.succeed(decoded.right) : Effect.die(malformed(decoded.left))
    })
  return {
    all,
    first: (query: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>): Effect.Effect<A | undefined> =>
      Effect.map(all(query), (rows) => rows[0]),
    /** Decodes one already-fetched row (a synchronous read, e.g. FastReads); throws MalformedRow. */
    decodeSync: (row: unknown): A => {
      const decoded = decodeOne(row)
      if (decoded._tag === "Left") throw malformed(decoded.left)
      return decoded.right
    }
  }
}

/** A statement whose result is not read; SQL failures become defects. */
export const run = (query: Effect.Effect<unknown, SqlError.SqlError>): Effect.Effect<void> => Effect.orDie(Effect.asVoid(query))
