/**
 * Cursor pagination for every list route (spec §4.4, §4.7, §8; reference §8 for `/v1/events`).
 *
 * A cursor is opaque to clients: base64url of `{"v":1,"s":<scope>,"k":<position>}`.
 * - `scope` binds it to one list, e.g. `events:<project id>` or `sandboxes:<project id>`: a cursor minted for
 *   another list or project is refused like a malformed one, with 422 `validation_error` (`details.issues` points
 *   at the cursor parameter).
 * - `position` is the sort key of the last item of the page (e.g. `[seq]`, or `[created_at, id]` for a
 *   newest-first list); pass a Schema of it to `decodeCursor` so a tampered cursor cannot reach the query.
 *
 * Usage in a handler (urlParams from `PageParams`, or your own struct reusing `CursorParam` / `LimitParam`):
 * ```ts
 * const scope = `things:${projectId}`
 * const after = cursor === undefined ? undefined : yield* decodeCursor(scope, cursor, Schema.Tuple(Schema.String, Schema.String))
 * const rows = yield* ThingsRepo.page(projectId, after, limit + 1)   // one extra row, after the position (src/db/repos)
 * const { items, next } = page(rows, limit, scope, (last) => [last.created_at, last.id])
 * return { things: items.map(toWire), next_cursor: next }
 * ```
 */
import { Effect, Either, ParseResult, Schema } from "effect"
import { CURSOR_VERSION, encodeCursor, type Position } from "../domain/Cursor.ts"
import { type Coded, type Unprocessable, validationError } from "../domain/Errors.ts"

export { encodeCursor, type Position, type PositionPart } from "../domain/Cursor.ts"

export const CursorParam = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(512)).annotations({
  identifier: "Cursor",
  description: "Opaque cursor from a previous page's `next_cursor` (1–512 characters)"
})

/** `limit` as a query parameter: an integer 1–100, default 50. */
export const LimitParam = Schema.optionalWith(
  Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100)).annotations({ description: "Page size, 1–100 (default 50)" }),
  { default: () => 50 }
)

/** The usual query parameters of a list route: `?cursor=&limit=`. */
export const PageParams = Schema.Struct({
  cursor: Schema.optional(CursorParam),
  limit: LimitParam
})

const AnyPosition: Schema.Schema<Position> = Schema.Array(Schema.Union(Schema.String, Schema.Number))

const Payload = Schema.Struct({ v: Schema.Literal(CURSOR_VERSION), s: Schema.String, k: Schema.Unknown })
const decodePayload = Schema.decodeUnknownEither(Schema.parseJson(Payload))

type BadCursor = Coded<Unprocessable, "validation_error">
const badCursor = (param: string, message: string) => validationError("Invalid cursor", [{ path: param, message }])

/**
 * The position in a cursor minted for `scope`, checked against `shape` (default: any array of strings and
 * numbers), or 422 `validation_error`. `param` names the query parameter in the issue (default `cursor`).
 */
export function decodeCursor(scope: string, cursor: string, shape?: undefined, param?: string): Effect.Effect<Position, BadCursor>
export function decodeCursor<A, I>(scope: string, cursor: string, shape: Schema.Schema<A, I>, param?: string): Effect.Effect<A, BadCursor>
export function decodeCursor<A, I>(scope: string, cursor: string, shape?: Schema.Schema<A, I>, param = "cursor"): Effect.Effect<A | Position, BadCursor> {
  return Effect.suspend(() => {
    // base64url only: Buffer.from would silently skip other characters.
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return Effect.fail(badCursor(param, "is not a cursor this server issued"))
    const payload = decodePayload(Buffer.from(cursor, "base64url").toString("utf8"))
    if (Either.isLeft(payload)) return Effect.fail(badCursor(param, "is not a cursor this server issued"))
    if (payload.right.s !== scope) return Effect.fail(badCursor(param, "belongs to another list"))
    const position: Either.Either<A | Position, ParseResult.ParseIssue> = shape === undefined
      ? ParseResult.decodeUnknownEither(AnyPosition)(payload.right.k)
      : ParseResult.decodeUnknownEither(shape)(payload.right.k)
    if (Either.isLeft(position)) return Effect.fail(badCursor(param, "is malformed"))
    return Effect.succeed<A | Position>(position.right)
  })
}

/** Given up to `limit + 1` rows, the page and the cursor of the next one (null when this is the last page). */
export const page = <A>(rows: ReadonlyArray<A>, limit: number, scope: string, position: (last: A) => Position) => {
  const items = rows.slice(0, limit)
  const last = items[items.length - 1]
  return { items, next: rows.length > limit && last !== undefined ? encodeCursor(scope, position(last)) : null }
}
