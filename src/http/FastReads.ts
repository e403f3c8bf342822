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
 * `*ToWire` functions the handlers use, from rows read by the db layer's queries (src/db/FastReadQueries.ts, on
 * the dialect's synchronous read connection), and `test/http/fast-reads.test.ts` checks they equal the full
 * stack's. A read that throws (a row that does not decode) is handed over too: the full stack answers it.
 */
import { Effect, FiberRef, FiberRefs, LogLevel, Runtime } from "effect"
import { openFastReadQueries } from "../db/FastReadQueries.ts"
import type { ApiKeyCredentialRow } from "../db/repos/Projects.ts"
import { API_KEY_PREFIX, sha256Hex } from "../domain/Tokens.ts"
import { lastUsedIsStale } from "../services/Credentials.ts"
import { WELL_FORMED_REQUEST_ID } from "./RequestId.ts"
import { operationToWire, processToWire, runtimeOperationToWire, sandboxToWire } from "./wire/Sandboxes.ts"

type Route = (request: Bun.BunRequest, server: Bun.Server<unknown>) => Response | Promise<Response>

export interface FastReads {
  readonly routes: Record<string, Route>
  readonly close: () => void
}

const BEARER = /^bearer\s+(\S+)\s*$/i

export const makeFastReads = (options: { readonly dataDir: string; readonly runtime: Runtime.Runtime<never> }): FastReads => {
  const db = openFastReadQueries(options.dataDir)
  // The access log of the full stack (HttpMiddleware.logger), written only when LOG_LEVEL lets info through.
  const logs = LogLevel.lessThanEqual(FiberRefs.getOrDefault(options.runtime.fiberRefs, FiberRef.currentMinimumLogLevel), LogLevel.Info)
  const runLog = Runtime.runSync(options.runtime)

  /** The caller's key when the request is a plain, valid, key-authenticated GET the full stack would accept as is. */
  const caller = (request: Request): { readonly key: ApiKeyCredentialRow; readonly requestId: string } | undefined => {
    if (request.method !== "GET" || request.url.includes("?")) return undefined
    const token = BEARER.exec(request.headers.get("authorization") ?? "")?.[1]
    if (token === undefined || !token.startsWith(API_KEY_PREFIX)) return undefined
    const key = db.liveApiKeyByHash(sha256Hex(token))
    if (key === undefined) return undefined
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
  const route = (read: (request: Bun.BunRequest, key: ApiKeyCredentialRow) => unknown): Route => (request, server) => {
    let body: unknown
    let who: ReturnType<typeof caller>
    try {
      who = caller(request)
      body = who === undefined ? undefined : read(request, who.key)
    } catch {
      body = undefined
    }
    return body === undefined ? fallThrough(server, request) : answer(request, who!.requestId, body)
  }

  return {
    routes: {
      "/v1/sandboxes/:sandbox_id": route((request, key) => {
        const row = db.sandbox(param(request, "sandbox_id"))
        return row !== undefined && row.project_id === key.project_id ? sandboxToWire(row) : undefined
      }),
      "/v1/sandboxes/:sandbox_id/processes/:process_id": route((request, key) => {
        const row = db.process(param(request, "process_id"))
        if (row === undefined || row.project_id !== key.project_id || row.sandbox_id !== param(request, "sandbox_id")) return undefined
        return processToWire(row, db.capabilities(row.sandbox_id))
      }),
      "/v1/sandboxes/:sandbox_id/runtime-operations/:runtime_operation_id": route((request, key) => {
        const row = db.runtimeOperation(param(request, "runtime_operation_id"))
        if (row === undefined || row.project_id !== key.project_id || row.sandbox_id !== param(request, "sandbox_id")) return undefined
        return runtimeOperationToWire(row, db.capabilities(row.sandbox_id))
      }),
      "/v1/operations/:operation_id": route((request, key) => {
        const row = db.operation(param(request, "operation_id"))
        // As in the handler: an operation is read with the key that caused it.
        return row !== undefined && row.project_id === key.project_id && row.created_by_key_id === key.id ? operationToWire(row) : undefined
      })
    },
    close: () => db.close()
  }
}

const param = (request: Bun.BunRequest, name: string): string => (request.params as Record<string, string>)[name] ?? ""

/** Hands the request to the server's `fetch` handler: the Effect HttpApi app. */
const fallThrough = (server: Bun.Server<unknown>, request: Request): Response | Promise<Response> => server.fetch(request)

/**
 * A scoped FastReads, closed with the server. On PostgreSQL there is no synchronous read connection: no route is
 * answered here and every request takes the full stack.
 */
export const FastReadsScoped = (config: { readonly dataDir: string; readonly databaseUrl?: string | undefined }) =>
  config.databaseUrl !== undefined
    ? Effect.succeed<FastReads>({ routes: {}, close: () => undefined })
    : Effect.acquireRelease(
      Effect.map(Effect.runtime<never>(), (runtime) => makeFastReads({ dataDir: config.dataDir, runtime })),
      (fast) => Effect.sync(fast.close)
    )
