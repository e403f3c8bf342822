/**
 * Fast reads: `GET /v1/sandboxes/{id}`, its processes and runtime operations (`…/processes/{id}`,
 * `…/runtime-operations/{id}`) and `GET /v1/operations/{id}`, answered straight from the database by Bun's
 * router before the Effect HttpApi stack (SQLite: a synchronous read connection; PostgreSQL: a small pool of its
 * own, the key and the rows read side by side). These are what clients poll (an agent waits on an operation, a process or a
 * file read by reading it again and again), and a request through the full stack costs ~1 ms of CPU here, which
 * both slows the poll and takes that CPU from the jobs being waited on.
 *
 * Only the plain success is answered here. Anything else goes to the full stack unchanged, which owns every error
 * and side effect: a missing or malformed credential or project header, an unknown, revoked or expired key, a key
 * whose `last_used_at` is due to be refreshed, a row of another project (or another key's operation), no row at
 * all, a query string, a malformed `x-request-id`, any method but GET. The bodies are built by the same
 * `*ToWire` functions the handlers use, from rows read by the db layer's queries (src/db/FastReadQueries.ts, through services/PolledReads.ts), and
 * `test/http/fast-reads.test.ts` checks on both engines that they equal the full stack's. A read that throws or
 * rejects (a row that does not decode, a lost connection) is handed over too: the full stack answers it.
 */
import { Effect, FiberRef, FiberRefs, LogLevel, Runtime } from "effect"
import { API_KEY_PREFIX, sha256Hex } from "../domain/Tokens.ts"
import { type ApiKeyCredentialRow, keyAccepted, type MaybePromise, openPolledReads, type PolledReads } from "../services/PolledReads.ts"
import { WELL_FORMED_REQUEST_ID } from "./RequestId.ts"
import { operationToWire, processToWire, runtimeOperationToWire, sandboxToWire } from "./wire/Sandboxes.ts"

type Route = (request: Bun.BunRequest, server: Bun.Server<unknown>) => Response | Promise<Response>

/** The polled reads' routes (Bun's patterns), each the path of its contract route. */
export const FAST_READ_PATHS = [
  "/v1/sandboxes/:sandbox_id",
  "/v1/sandboxes/:sandbox_id/processes/:process_id",
  "/v1/sandboxes/:sandbox_id/runtime-operations/:runtime_operation_id",
  "/v1/operations/:operation_id"
] as const

export type FastReadPath = (typeof FAST_READ_PATHS)[number]

export interface FastReads {
  readonly routes: Readonly<Record<string, Route>>
}

const BEARER = /^bearer\s+(\S+)\s*$/i

/** `f` of a value now, or of a promised one later. */
const then = <A, B>(value: MaybePromise<A>, f: (a: A) => MaybePromise<B>): MaybePromise<B> => (value instanceof Promise ? value.then(f) : f(value))

/** Every value at once: now when all are (SQLite), else a Promise of all (PostgreSQL: the reads run side by side). */
const all = <T extends ReadonlyArray<unknown>>(values: T): MaybePromise<{ -readonly [K in keyof T]: Awaited<T[K]> }> =>
  (values.some((v) => v instanceof Promise) ? Promise.all(values) : values) as MaybePromise<{ -readonly [K in keyof T]: Awaited<T[K]> }>

export const makeFastReads = (options: { readonly queries: PolledReads; readonly runtime: Runtime.Runtime<never> }): FastReads => {
  const db = options.queries
  // The access log of the full stack (HttpMiddleware.logger), written only when LOG_LEVEL lets info through.
  const logs = LogLevel.lessThanEqual(FiberRefs.getOrDefault(options.runtime.fiberRefs, FiberRef.currentMinimumLogLevel), LogLevel.Info)
  const runLog = Runtime.runSync(options.runtime)

  /** The token and request id of a plain key-authenticated GET the full stack would take as is (before the key is read). */
  const plainRequest = (request: Request): { readonly keyHash: string; readonly project: string; readonly requestId: string } | undefined => {
    if (request.method !== "GET" || request.url.includes("?")) return undefined
    const token = BEARER.exec(request.headers.get("authorization") ?? "")?.[1]
    if (token === undefined || !token.startsWith(API_KEY_PREFIX)) return undefined
    const project = request.headers.get("x-metal-project-id")
    if (project === null) return undefined
    const incoming = request.headers.get("x-request-id")
    if (incoming !== null && !WELL_FORMED_REQUEST_ID.test(incoming)) return undefined
    return { keyHash: sha256Hex(token), project, requestId: incoming ?? `req_${crypto.randomUUID().replaceAll("-", "")}` }
  }

  const answer = (request: Request, requestId: string, body: unknown): Response => {
    if (logs) {
      runLog(Effect.logInfo("Sent HTTP response").pipe(
        Effect.annotateLogs({ "http.status": 200, "http.method": "GET", "http.url": new URL(request.url).pathname, request_id: requestId })
      ))
    }
    return new Response(JSON.stringify(body), { headers: { "content-type": "application/json", "x-request-id": requestId } })
  }

  /**
   * A route: `reads` the rows it needs (by the path's ids, alongside the key's), `render`s the body from them for
   * the caller's key, or undefined to hand the request to the full stack (which it also gets when a read throws or
   * rejects).
   */
  const route = <T extends ReadonlyArray<unknown>>(
    reads: (request: Bun.BunRequest) => T,
    render: (rows: { -readonly [K in keyof T]: Awaited<T[K]> }, key: ApiKeyCredentialRow, request: Bun.BunRequest) => unknown
  ): Route => (request, server) => {
    const handOver = () => fallThrough(server, request)
    try {
      const plain = plainRequest(request)
      if (plain === undefined) return handOver()
      const answered = then(all([db.liveApiKeyByHash(plain.keyHash), all(reads(request))] as const), ([key, rows]) => {
        if (!keyAccepted(key, plain.project)) return undefined
        const body = render(rows, key, request)
        return body === undefined ? undefined : answer(request, plain.requestId, body)
      })
      return answered instanceof Promise ? answered.then((r) => r ?? handOver(), handOver) : answered ?? handOver()
    } catch {
      return handOver()
    }
  }

  return {
    routes: {
      "/v1/sandboxes/:sandbox_id": route(
        (request) => [db.sandbox(param(request, "sandbox_id"))] as const,
        ([row], key) => row !== undefined && row.project_id === key.project_id ? sandboxToWire(row) : undefined
      ),
      "/v1/sandboxes/:sandbox_id/processes/:process_id": route(
        (request) => [db.process(param(request, "process_id")), db.capabilities(param(request, "sandbox_id"))] as const,
        ([row, capabilities], key, request) =>
          row === undefined || row.project_id !== key.project_id || row.sandbox_id !== param(request, "sandbox_id") ? undefined : processToWire(row, capabilities)
      ),
      "/v1/sandboxes/:sandbox_id/runtime-operations/:runtime_operation_id": route(
        (request) => [db.runtimeOperation(param(request, "runtime_operation_id")), db.capabilities(param(request, "sandbox_id"))] as const,
        ([row, capabilities], key, request) =>
          row === undefined || row.project_id !== key.project_id || row.sandbox_id !== param(request, "sandbox_id") ? undefined : runtimeOperationToWire(row, capabilities)
      ),
      "/v1/operations/:operation_id": route(
        (request) => [db.operation(param(request, "operation_id"))] as const,
        // As in the handler: an operation is read with the key that caused it.
        ([row], key) => row !== undefined && row.project_id === key.project_id && row.created_by_key_id === key.id ? operationToWire(row) : undefined
      )
    }
  }
}

const param = (request: Bun.BunRequest, name: string): string => (request.params as Record<string, string>)[name] ?? ""

/** Hands the request to the server's `fetch` handler: the Effect HttpApi app. */
const fallThrough = (server: Bun.Server<unknown>, request: Request): Response | Promise<Response> => server.fetch(request)

/** FastReads over the configured engine's fast-read queries, closed with the scope (with the server). */
export const FastReadsScoped = (config: { readonly dataDir: string; readonly databaseUrl?: string | undefined }) =>
  Effect.gen(function*() {
    const queries = yield* openPolledReads(config)
    return makeFastReads({ queries, runtime: yield* Effect.runtime<never>() })
  })
