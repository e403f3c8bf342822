/**
 * The reads behind FastReads (src/http/FastReads.ts): the API key check and the rows of the polled GETs, as
 * prepared statements on the dialect's synchronous read connection. Same SQL and same row Schemas as the
 * repositories; a row that does not decode throws `MalformedRow` (FastReads then hands the request to the full
 * stack, which answers 500).
 *
 * Rows read again unchanged (what polling does) are decoded once (`rowsOf`'s memo): decoding a sandbox row costs
 * ~15–40 µs, the memo ~2 µs, on a path that answers in ~100 µs. Not for rows carrying a file's bytes.
 */
import type { Statement } from "bun:sqlite"
import type { Schema } from "effect"
import { API_KEY_BY_HASH, ApiKeyCredentialRow } from "./repos/Projects.ts"
import { OperationRow } from "./repos/Operations.ts"
import { ProcessRow } from "./repos/Processes.ts"
import { RUNTIME_OPERATION_WITH_DATA, RuntimeOperationRow } from "./repos/RuntimeOperations.ts"
import { SandboxRow } from "./repos/Sandboxes.ts"
import { rowsOf } from "./Rows.ts"
import { databaseFile } from "./Sql.ts"
import { openSqliteReadConnection } from "./SqliteDialect.ts"

export interface FastReadQueries {
  readonly liveApiKeyByHash: (keyHash: string) => ApiKeyCredentialRow | undefined
  readonly sandbox: (id: string) => SandboxRow | undefined
  readonly process: (id: string) => ProcessRow | undefined
  readonly operation: (id: string) => OperationRow | undefined
  readonly runtimeOperation: (id: string) => RuntimeOperationRow | undefined
  readonly close: () => void
}

/** Distinct row texts remembered per query (oldest forgotten first). */
const MEMO_ROWS = 512

export const openFastReadQueries = (dataDir: string): FastReadQueries => {
  const db = openSqliteReadConnection(databaseFile(dataDir))
  const reader = <A, I>(table: string, schema: Schema.Schema<A, I>, sql: string, memo: boolean) => {
    const statement: Statement<unknown, [string]> = db.query(sql)
    const decode = rowsOf(table, schema, { memo: memo ? MEMO_ROWS : 0 }).decodeSync
    return (param: string): A | undefined => {
      const row = statement.get(param)
      return row === null ? undefined : decode(row)
    }
  }
  return {
    liveApiKeyByHash: reader("api_keys", ApiKeyCredentialRow, API_KEY_BY_HASH, true),
    sandbox: reader("sandboxes", SandboxRow, "SELECT * FROM sandboxes WHERE id = ?", true),
    process: reader("processes", ProcessRow, "SELECT * FROM processes WHERE id = ?", true),
    operation: reader("operations", OperationRow, "SELECT * FROM operations WHERE id = ?", true),
    runtimeOperation: reader("runtime_operations", RuntimeOperationRow, RUNTIME_OPERATION_WITH_DATA, false),
    close: () => db.close()
  }
}
