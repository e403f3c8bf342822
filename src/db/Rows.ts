/**
 * Rows are decoded by Schema, never cast: a repository declares the Schema of each row it reads (JSON columns
 * with `Json`, 0/1 columns with `IntBoolean`, money with `MicroUsd`), and a row that does not decode is a
 * `MalformedRow` — a typed error raised as a defect at the repository boundary (→ 500 `internal_error`, logged),
 * like any other failure of the database itself.
 */
import type { SqlError } from "@effect/sql"
import { Effect, Either, ParseResult, Schema } from "effect"
import { MalformedRow } from "../domain/MalformedRow.ts"

export { MalformedRow }

/** Texts up to this long are remembered per JSON column (the column's last `JSON_MEMO_ENTRIES` distinct ones). */
const JSON_MEMO_CHARS = 4096
const JSON_MEMO_ENTRIES = 256

/**
 * A JSON text column holding a value of `schema` (decoded with `Schema.parseJson(schema)`). A text decoded before
 * gets the value decoded then: JSON columns rarely change while their rows do (a sandbox's `requested` and
 * capability snapshot stay as its `last_activity_at` moves), and a decode costs tens of µs on a busy server.
 * Decoded values are immutable, so sharing them is safe.
 */
export const Json = <A, I>(schema: Schema.Schema<A, I>): Schema.Schema<A, string> => {
  const json = Schema.parseJson(schema)
  const decode = ParseResult.decodeUnknownEither(json)
  const encode = ParseResult.encodeEither(json)
  const known = new Map<string, A>()
  // The value is checked by `schema` in `decode`; the target side only carries its type.
  const Decoded = Schema.declare((_: unknown): _ is A => true, { identifier: "JsonValue" })
  return Schema.transformOrFail(Schema.String, Decoded, {
    strict: true,
    decode: (text) => {
      const hit = known.get(text)
      if (hit !== undefined) return ParseResult.succeed(hit)
      const decoded = decode(text)
      if (Either.isLeft(decoded)) return ParseResult.fail(decoded.left)
      if (text.length <= JSON_MEMO_CHARS) {
        if (known.size >= JSON_MEMO_ENTRIES) known.delete(known.keys().next().value!)
        known.set(text, decoded.right)
      }
      return ParseResult.succeed(decoded.right)
    },
    encode: (value) => encode(value)
  })
}

/** A 0/1 integer column as a boolean. */
export const IntBoolean = Schema.transform(Schema.Literal(0, 1), Schema.Boolean, {
  strict: true,
  decode: (n) => n === 1,
  encode: (b) => (b ? 1 : 0)
})

/**
 * Our id columns, typed with their kind's brand (src/domain/Ids.ts), so a row hands services a `SandboxId`, not a
 * string. The form is not checked again: every id was decoded or minted before it was written, and is read back
 * as written. (A brand only annotates the schema: decoding these is decoding a string.)
 */
export const IdColumn = {
  project: Schema.String.pipe(Schema.brand("ProjectId")),
  sandbox: Schema.String.pipe(Schema.brand("SandboxId")),
  operation: Schema.String.pipe(Schema.brand("OperationId")),
  process: Schema.String.pipe(Schema.brand("ProcessId")),
  runtimeOperation: Schema.String.pipe(Schema.brand("RuntimeOperationId")),
  endpoint: Schema.String.pipe(Schema.brand("EndpointId")),
  recording: Schema.String.pipe(Schema.brand("RecordingId")),
  organization: Schema.String.pipe(Schema.brand("OrganizationId")),
  user: Schema.String.pipe(Schema.brand("UserId")),
  apiKey: Schema.String.pipe(Schema.brand("ApiKeyId"))
}

/** Integer micro-USD as a bigint. */
export const MicroUsd = Schema.BigIntFromNumber

/**
 * Decoders of `schema` rows from `table`: every row, the first, or one already fetched. With `memo`, a row whose
 * text was decoded before (among the last `memo` distinct ones) gets the value decoded then: rows read again
 * unchanged, as sandboxes are on every request about them, cost a JSON.stringify instead of a decode (~2 µs
 * instead of ~15–40 µs for a sandbox). Decoded values are immutable, so sharing them is safe. Not for rows with
 * large columns (a file's bytes).
 */
export const rowsOf = <A, I>(table: string, schema: Schema.Schema<A, I>, options: { readonly memo?: number } = {}) => {
  const decodeAll = Schema.decodeUnknownEither(Schema.Array(schema))
  const decodeOne = Schema.decodeUnknownEither(schema)
  const malformed = (e: ParseResult.ParseError) => new MalformedRow({ table, message: ParseResult.TreeFormatter.formatErrorSync(e) })
  const memo = options.memo ?? 0
  const known = new Map<string, A>()
  const decodeSync = (row: unknown): A => {
    const key = memo > 0 ? JSON.stringify(row) : undefined
    const hit = key === undefined ? undefined : known.get(key)
    if (hit !== undefined) return hit
    const decoded = decodeOne(row)
    if (decoded._tag === "Left") throw malformed(decoded.left)
    if (key !== undefined) {
      if (known.size >= memo) known.delete(known.keys().next().value!)
      known.set(key, decoded.right)
    }
    return decoded.right
  }
  const all = (query: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>): Effect.Effect<ReadonlyArray<A>> =>
    Effect.flatMap(Effect.orDie(query), (rows) => {
      if (memo > 0) return Effect.try({ try: () => rows.map(decodeSync), catch: (e) => e }).pipe(Effect.orDie)
      const decoded = decodeAll(rows)
      return decoded._tag === "Right" ? Effect.succeed(decoded.right) : Effect.die(malformed(decoded.left))
    })
  return {
    all,
    first: (query: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>): Effect.Effect<A | undefined> =>
      Effect.map(all(query), (rows) => rows[0]),
    /** Decodes one already-fetched row (a synchronous read, e.g. FastReads); throws MalformedRow. */
    decodeSync
  }
}

/** A statement whose result is not read; SQL failures become defects. */
export const run = (query: Effect.Effect<unknown, SqlError.SqlError>): Effect.Effect<void> => Effect.orDie(Effect.asVoid(query))
