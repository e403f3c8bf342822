/**
 * The reads behind FastReads (src/http/FastReads.ts): the API key check and the rows of the polled GETs, as
 * prepared statements on the dialect's synchronous read connection. Same SQL and same row Schemas as the
 * repositories; a row that does not decode throws `MalformedRow` (FastReads then hands the request to the full
 * stack, which answers 500).
 *
 * Rows read again unchanged (what polling does) are decoded once (`rowsOf`'s memo, shared with the repositories
 * for sandboxes and processes): on a busy server a row decode costs ~50–200 µs, the memo ~2 µs, on a path that
 * answers in ~100 µs. A process or file operation embeds only its sandbox's capability snapshot, read alone.
 */
import type { Statement } from "bun:sqlite"
import { API_KEY_BY_HASH, ApiKeyCredentialRow } from "./repos/Projects.ts"
import { OperationRow } from "./repos/Operations.ts"
import { type ProcessRow, processRows } from "./repos/Processes.ts"
import { RUNTIME_OPERATION_WITH_DATA, RuntimeOperationRow } from "./repos/RuntimeOperations.ts"
import { capabilitiesRows, type SandboxRow, sandboxRows } from "./repos/Sandboxes.ts"
import { rowsOf } from "./Rows.ts"
import { databaseFile } from "./Sql.ts"
import { openSqliteReadConnection } from "./SqliteDialect.ts"

export interface FastReadQueries {
  readonly liveApiKeyByHash: (keyHash: string) => ApiKeyCredentialRow | undefined
  readonly sandbox: (id: string) => SandboxRow | undefined
  /** A sandbox's capability snapshot, alone (null when none). */
  readonly capabilities: (sandboxId: string) => SandboxRow["capabilities"]
  readonly process: (id: string) => ProcessRow | undefined
  readonly operation: (id: string) => OperationRow | undefined
  readonly runtimeOperation: (id: string) => RuntimeOperationRow | undefined
  readonly close: () => void
}

export const openFastReadQueries = (dataDir: string): FastReadQueries => {
  const db = openSqliteReadConnection(databaseFile(dataDir))
  const reader = <A>(decode: (row: unknown) => A, sql: string) => {
    const statement: Statement<unknown, [string]> = db.query(sql)
    return (param: string): A | undefined => {
      const row = statement.get(param)
      return row === null ? undefined : decode(row)
    }
  }
  const capabilities = reader(capabilitiesRows.decodeSync, "SELECT capabilities FROM sandboxes WHERE id = ?")
  return {
    liveApiKeyByHash: reader(rowsOf("api_keys", ApiKeyCredentialRow, { memo: 512 }).decodeSync, API_KEY_BY_HASH),
    sandbox: reader(sandboxRows.decodeSync, "SELECT * FROM sandboxes WHERE id = ?"),
    capabilities: (sandboxId) => capabilities(sandboxId)?.capabilities ?? null,
    process: reader(processRows.decodeSync, "SELECT * FROM processes WHERE id = ?"),
    operation: reader(rowsOf("operations", OperationRow, { memo: 512 }).decodeSync, "SELECT * FROM operations WHERE id = ?"),
    // Not remembered: a read's row carries the file's bytes.
    runtimeOperation: reader(rowsOf("runtime_operations", RuntimeOperationRow).decodeSync, RUNTIME_OPERATION_WITH_DATA),
    close: () => db.close()
  }
}
