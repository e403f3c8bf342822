/**
 * Fast reads: `GET /v1/sandboxes/{id}`, its processes and runtime operations (`…/processes/{id}`,
 * `…/runtime-operations/{id}`) and `GET /v1/operations/{id}`, answered straight from SQLite by Bun's router
 * before the Effect HttpApi stack. These are what clients poll (an agent waits on an operation, a process or a
 * file read by reading it again and again), and a request through the full stack costs ~1 ms of CPU here, which
 * both slows the poll and takes that CPU from the jobs being waited on.
 *
 * Only the plain success is answered here. Anything else goes to the full stack unchanged, which owns every error
 * and side effect: a missing or malformed credential or project header, an unknown, revoked or expired key, a key
 * whose `last_used_at` is due to be refreshed, a row of another project (or another key's operation), no row at
 * all, a query string, a malformed `x-request-id`, any method but GET. The bodies are built by the same
 * `*ToWire` functions the handlers use, and `test/http/fast-reads.test.ts` checks they equal the full stack's.
 */
import { Database, type Statement } from "bun:sqlite"
import { Effect, FiberRef, FiberRefs, LogLevel, Runtime } from "effect"
import { databaseFile } from "../db/Sql.ts"
import { operationToWire, type OperationRow } from "../services/sandboxes/Operations.ts"
import { type ProcessRow, processToWire } from "../services/sandboxes/Processes.ts"
import { RUNTIME_OPERATION_WITH_DATA, type RuntimeOperationRow, runtimeOperationToWire } from "../services/sandboxes/RuntimeOperations.ts"
import { capabilitiesOf, type SandboxRow, sandboxToWire } from "../services/sandboxes/SandboxRows.ts"
import { API_KEY_BY_HASH, type ApiKeyRow, lastUsedIsStale } from "../services/Credentials.ts"
import { sha256Hex } from "../domain/Tokens.ts"
import { API_KEY_PREFIX } from "../domain/Tokens.ts"
import { WELL_FORMED_REQUEST_ID } from "./RequestId.ts"

type Route = (request: Bun.BunRequest, server: Bun.Server<unknown>) => Response | Promise<Response>

export interface FastReads {
  readonly routes: Record<string, Route>
  readonly close: () => void
}

const BEARER = /^bearer\s+(\S+)\s*$/i

export const makeFastReads = (options: { readonly dataDir: string; readonly runtime: Runtime.Runtime<never> }): FastReads => {
  // A second connection to the same WAL file: reads see every committed write and never block the writer.
  const db = new Database(databaseFile(options.dataDir))
  db.run("PRAGMA busy_timeout = 5000")
  db.run("PRAGMA query_only = ON") // reads only, whatever a later change might try
  const keyByHash: Statement<ApiKeyRow, [string]> = db.query(API_KEY_BY_HASH)
  const sandboxById: Statement<SandboxRow, [string]> = db.query("SELECT * FROM sandboxes WHERE id = ?")
  const processById: Statement<ProcessRow, [string]> = db.query("SELECT * FROM processes WHERE id = ?")
  const operationById: Statement<OperationRow, [string]> = db.query("SELECT * FROM operations WHERE id = ?")
  const runtimeOperationById: Statement<RuntimeOperationRow, [string]> = db.query(RUNTIME_OPERATION_WITH_DATA)
  // The access log of the full stack (HttpMiddleware.logger), written only when LOG_LEVEL lets info through.
  const logs = LogLevel.lessThanEqual(FiberRefs.getOrDefault(options.runtime.fiberRefs, FiberRef.currentMinimumLogLevel), LogLevel.Info)
  const runLog = Runtime.runSync(options.runtime)

  /** The caller's key when the request is a plain, valid, key-authenticated GET the full stack would accept as is. */
  const caller = (request: Request): { readonly key: ApiKeyRow; readonly requestId: string } | undefined => {
    if (request.method !== "GET" || request.url.includes("?")) return undefined
    const token = BEARER.exec(request.headers.get("authorization") ?? "")?.[1]
    if (token === undefined || !token.startsWith(API_KEY_PREFIX)) return undefined
    const key = keyByHash.get(sha256Hex(token))
    if (key === null) return undefined
    const now = new Date().toISOString()
    // As Credentials.resolveApiKey decides; a key whose use is due to be recorded goes to the full stack.
    if ((key.expires_at !== null && key.expires_at <= now) || lastUsedIsStale(key.last_used_at, now)) return undefined
    if (request.headers.get("x-metal-project-id") !== key.project_id) return undefined
    const incoming = request.headers.get("x-request-id")
    if (incoming !== null && !WELL_FORMED_REQUEST_ID.test(incoming)) return undefined
    return { key, requestId: incoming ?? `req_${crypto.randomUUID().replaceAll("-", "")}` }
  }

  const answer = (request: Request, requestId: string, body: unknown): Response => {
    if (logs) {
      runLog(Effect.logInfo("Sent HTTP response").pipe(
        Effect.annotateLogs({ "http.status": 200, "http.method": "GET", "http.url": new URL(request.url).pathname, request_id: requestId })
      ))
    }
    return new Response(JSON.stringify(body), { headers: { "content-type": "application/json", "x-request-id": requestId } })
  }

  /** Wraps a read: its answer, or the full stack's when it has none. */
  const route = (read: (request: Bun.BunRequest, key: ApiKeyRow) => unknown): Route => (request, server) => {
    const who = caller(request)
    const body = who === undefined ? undefined : read(request, who.key)
    return body === undefined ? fallThrough(server, request) : answer(request, who!.requestId, body)
  }

  return {
    routes: {
      "/v1/sandboxes/:sandbox_id": route((request, key) => {
        const row = sandboxById.get(param(request, "sandbox_id"))
        return row !== null && row.project_id === key.project_id ? sandboxToWire(row) : undefined
      }),
      "/v1/sandboxes/:sandbox_id/processes/:process_id": route((request, key) => {
        const row = processById.get(param(request, "process_id"))
        if (row === null || row.project_id !== key.project_id || row.sandbox_id !== param(request, "sandbox_id")) return undefined
        return processToWire(row, capabilitiesOf(sandboxById.get(row.sandbox_id)))
      }),
      "/v1/sandboxes/:sandbox_id/runtime-operations/:runtime_operation_id": route((request, key) => {
        const row = runtimeOperationById.get(param(request, "runtime_operation_id"))
        if (row === null || row.project_id !== key.project_id || row.sandbox_id !== param(request, "sandbox_id")) return undefined
        return runtimeOperationToWire(row, capabilitiesOf(sandboxById.get(row.sandbox_id)))
      }),
      "/v1/operations/:operation_id": route((request, key) => {
        const row = operationById.get(param(request, "operation_id"))
        // As in the handler: an operation is read with the key that caused it.
        return row !== null && row.project_id === key.project_id && row.created_by_key_id === key.id ? operationToWire(row) : undefined
      })
    },
    close: () => db.close()
  }
}

const param = (request: Bun.BunRequest, name: string): string => (request.params as Record<string, string>)[name] ?? ""

/** Hands the request to the server's `fetch` handler: the Effect HttpApi app. */
const fallThrough = (server: Bun.Server<unknown>, request: Request): Response | Promise<Response> => server.fetch(request)

/** A scoped FastReads, closed with the server. */
export const FastReadsScoped = (dataDir: string) =>
  Effect.acquireRelease(
    Effect.map(Effect.runtime<never>(), (runtime) => makeFastReads({ dataDir, runtime })),
    (fast) => Effect.sync(fast.close)
  )
