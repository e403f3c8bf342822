import { Data } from "effect"

/**
 * A stored row that does not hold what it must (src/db/Rows.ts: one that does not decode; src/http/wire: a
 * finished read without its data): raised as a defect (→ 500 `internal_error`, logged), like any other failure
 * of the database itself.
 */
export class MalformedRow extends Data.TaggedError("MalformedRow")<{
  readonly table: string
  readonly message: string
}> {}
