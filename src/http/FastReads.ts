/**
 * Fast reads: `GET /v1/sandboxes/{id}`, its processes and runtime operations (`…/processes/{id}`,
 * `…/runtime-operations/{id}`) and `GET /v1/operations/{id}`, answered straight from the database by Bun's
 * router before the Effect HttpApi stack (SQLite: a synchronous read connection; PostgreSQL: a small pool of its
 * own, the key and the rows read side by side). These are what clients poll (an agent waits on an operation, a process or a
 * file read by reading it again and again), and a request through the full stack costs ~1 ms of CPU here, which
 * both slows the poll and takes that CPU from the jobs being waited on. And the events followed
 * (`GET /v1/operations/{id}/events?follow=true`, what a client that starts an operation and waits for it opens;
 * `…/processes/{id}/events?follow=true`, a command's output as it comes), which through the full stack cost ~3–4
 * ms of CPU each and answered their head only once that stack had its turn.
 *
 * Only the plain success is answered here. Anything else goes to the full stack unchanged, which owns every error
 * and side effect: a missing or malformed credential or project header, an unknown, revoked or expired key, a key
 * whose `last_used_at` is due to be refreshed, a row of another project (or another key's operation), no row at
 * all, a query string (but a follow's own `?follow=true`), a Last-Event-ID the contract refuses, a malformed
 * `x-request-id`, any method but GET. The bodies are built by the same
 * `*ToWire` functions the handlers use (a followed stream's frames: Sse.ts `followRound`, as `followStream`'s),
 * from rows read by the db layer's queries (src/db/FastReadQueries.ts, through services/PolledReads.ts), and
 * `test/http/fast-reads.test.ts` checks on both engines that they equal the full stack's. A read that throws or
 * rejects (a row that does not decode, a lost connection) is handed over too: the full stack answers it.
 */
import { Effect, FiberRef, FiberRefs, LogLevel, Runtime } from "effect"
import type { OperationRow } from "../db/repos/Operations.ts"
import type { ProcessRow } from "../db/repos/Processes.ts"
import { API_KEY_PREFIX, sha256Hex } from "../domain/Tokens.ts"
import { LiveStreams, type LiveStreamsShape } from "../services/LiveStreams.ts"
import { type ApiKeyCredentialRow, keyAccepted, type MaybePromise, openPolledReads, type PolledReads } from "../services/PolledReads.ts"
import { TERMINAL_OPERATION_STATES } from "../services/sandboxes/Operations.ts"
import { TERMINAL_PROCESS_STATES } from "../services/sandboxes/Processes.ts"
import { onNextSignal, operationTopic, processTopic } from "../services/Signals.ts"
import { WELL_FORMED_REQUEST_ID } from "./RequestId.ts"
import { endFrame, FOLLOW_HEADERS, followRound, type FollowPosition, operationEventFrame, PROCESS_BATCH_EVENTS, processEventFrame, type SseEvent } from "./Sse.ts"
import { operationToWire, processToWire, runtimeOperationToWire, sandboxToWire } from "./wire/Sandboxes.ts"

type Route = (request: Bun.BunRequest, server: Bun.Server<unknown>) => Response | Promise<Response>

/** The polled reads' routes (Bun's patterns), each the path of its contract route, and the followed one. */
export const FAST_READ_PATHS = [
  "/v1/sandboxes/:sandbox_id",
  "/v1/sandboxes/:sandbox_id/processes/:process_id",
  "/v1/sandboxes/:sandbox_id/runtime-operations/:runtime_operation_id",
  "/v1/operations/:operation_id",
  "/v1/operations/:operation_id/events",
  "/v1/sandboxes/:sandbox_id/processes/:process_id/events"
] as const

/** The only query string a fast route takes: following an operation's or a process's events (every other read takes none). */
const FOLLOW_QUERY = "?follow=true"

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

export const makeFastReads = (options: {
  readonly queries: PolledReads
  readonly streams: LiveStreamsShape
  readonly runtime: Runtime.Runtime<never>
  /** A followed stream's heartbeat (tests shorten it). */
  readonly heartbeatMs?: number
}): FastReads => {
  const db = options.queries
  // The access log of the full stack (HttpMiddleware.logger), written only when LOG_LEVEL lets info through.
  const logs = LogLevel.lessThanEqual(FiberRefs.getOrDefault(options.runtime.fiberRefs, FiberRef.currentMinimumLogLevel), LogLevel.Info)
  const runLog = Runtime.runSync(options.runtime)

  /**
   * The token and request id of a plain key-authenticated GET the full stack would take as is (before the key is
   * read), whose query string is exactly `query` (none when empty).
   */
  const plainRequest = (request: Request, query: string): { readonly keyHash: string; readonly project: string; readonly requestId: string } | undefined => {
    if (request.method !== "GET") return undefined
    const mark = request.url.indexOf("?")
    if ((mark < 0 ? "" : request.url.slice(mark)) !== query) return undefined
    const token = BEARER.exec(request.headers.get("authorization") ?? "")?.[1]
    if (token === undefined || !token.startsWith(API_KEY_PREFIX)) return undefined
    const project = request.headers.get("x-metal-project-id")
    if (project === null) return undefined
    const incoming = request.headers.get("x-request-id")
    if (incoming !== null && !WELL_FORMED_REQUEST_ID.test(incoming)) return undefined
    return { keyHash: sha256Hex(token), project, requestId: incoming ?? `req_${crypto.randomUUID().replaceAll("-", "")}` }
  }

  const logSent = (request: Request, requestId: string) => {
    if (!logs) return
    runLog(Effect.logInfo("Sent HTTP response").pipe(
      Effect.annotateLogs({ "http.status": 200, "http.method": "GET", "http.url": new URL(request.url).pathname, request_id: requestId })
    ))
  }

  const json = (request: Request, requestId: string, body: unknown): Response => {
    logSent(request, requestId)
    return new Response(JSON.stringify(body), { headers: { "content-type": "application/json", "x-request-id": requestId } })
  }

  /**
   * A route: `reads` the rows it needs (by the path's ids, alongside the key's), and `respond`s from them for the
   * caller's key, or undefined to hand the request to the full stack (which it also gets when a read throws or
   * rejects). `query`: the one query string it takes.
   */
  const route = <T extends ReadonlyArray<unknown>>(
    query: string,
    reads: (request: Bun.BunRequest) => T,
    respond: (rows: { -readonly [K in keyof T]: Awaited<T[K]> }, key: ApiKeyCredentialRow, request: Bun.BunRequest, requestId: string) => Response | undefined
  ): Route => (request, server) => {
    const handOver = () => fallThrough(server, request)
    try {
      const plain = plainRequest(request, query)
      if (plain === undefined) return handOver()
      const answered = then(all([db.liveApiKeyByHash(plain.keyHash), all(reads(request))] as const), ([key, rows]) =>
        keyAccepted(key, plain.project) ? respond(rows, key, request, plain.requestId) : undefined)
      return answered instanceof Promise ? answered.then((r) => r ?? handOver(), handOver) : answered ?? handOver()
    } catch {
      return handOver()
    }
  }

  /** A polled read: the JSON body `render` makes from the rows for the caller's key (undefined: hand over). */
  const polled = <T extends ReadonlyArray<unknown>>(
    reads: (request: Bun.BunRequest) => T,
    render: (rows: { -readonly [K in keyof T]: Awaited<T[K]> }, key: ApiKeyCredentialRow, request: Bun.BunRequest) => unknown
  ): Route =>
    route("", reads, (rows, key, request, requestId) => {
      const body = render(rows, key, request)
      return body === undefined ? undefined : json(request, requestId, body)
    })

  /**
   * A resource's events after `after`, held open as the full stack's `followStream` inside `whileAllowed` holds
   * them (the same rounds, `followRound`): registered with LiveStreams for `key`, ended with an `endFrame` once
   * the key may no longer read it, and forgotten when the client goes away.
   */
  const follow = (source: FollowSource, after: number, key: ApiKeyCredentialRow, request: Request, requestId: string): Response => {
    const held = options.streams.open({ kind: "api_key", keyId: key.id, projectId: key.project_id })
    let position: FollowPosition = { after, quietSince: Date.now() }
    let stopWaiting: (() => void) | undefined
    let done = false
    const wakeOnEnd = () => stopWaiting?.()
    const finish = () => {
      if (done) return
      done = true
      stopWaiting?.()
      held.signal.removeEventListener("abort", wakeOnEnd)
      held.close()
    }
    held.signal.addEventListener("abort", wakeOnEnd)
    /** The next signal of the resource, at most `ms`, or sooner when the stream must end. */
    const wait = (ms: number) =>
      new Promise<void>((resolve) => {
        const cancel = onNextSignal(source.topic, ms, () => {
          stopWaiting = undefined
          resolve()
        })
        stopWaiting = () => {
          stopWaiting = undefined
          cancel()
          resolve()
        }
      })
    const body = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        try {
          for (;;) {
            if (done) return
            if (held.signal.aborted) {
              const reason = held.endReason()
              if (reason !== undefined) controller.enqueue(encoder.encode(endFrame(reason, requestId)))
              controller.close()
              return finish()
            }
            const over = await source.finished()
            const events = await source.eventsAfter(position.after)
            if (done || held.signal.aborted) continue
            const round = followRound(position, over, events, options.heartbeatMs)
            if (round._tag === "send") {
              position = round.next
              return controller.enqueue(round.bytes)
            }
            if (round._tag === "end") {
              controller.close()
              return finish()
            }
            await wait(round.ms)
          }
        } catch (cause) {
          // A read that failed (a lost connection, a row that does not decode): the stream is cut, as the full stack's would be.
          if (!done) {
            runLog(Effect.logWarning("a followed event stream failed; its connection is cut", { request_id: requestId, error: String(cause) }))
            controller.error(cause)
          }
          finish()
        }
      },
      cancel: finish
    })
    request.signal.addEventListener("abort", finish, { once: true })
    logSent(request, requestId)
    return new Response(body, { headers: { "content-type": "text/event-stream", ...FOLLOW_HEADERS, "x-request-id": requestId } })
  }

  /** The followed events of an operation: all of them after the position at each round, as `operationEvents`' follow reads them. */
  const operationSource = (operation: OperationRow): FollowSource => {
    const frame = operationEventFrame(operation.id)
    return {
      topic: operationTopic(operation.id),
      finished: () => then(db.operation(operation.id), (row) => row === undefined || TERMINAL_OPERATION_STATES.has(row.state)),
      eventsAfter: (after) => then(db.operationEventsAfter(operation.id, after), (rows) => rows.map(frame))
    }
  }

  /** The followed events of a process: at most PROCESS_BATCH_EVENTS a round, as the processes handler's follow reads them. */
  const processSource = (process: ProcessRow): FollowSource => {
    const frame = processEventFrame(process.id)
    return {
      topic: processTopic(process.id),
      finished: () => then(db.process(process.id), (row) => row === undefined || TERMINAL_PROCESS_STATES.includes(row.state)),
      eventsAfter: (after) => then(db.processEventsAfter(process.id, after, PROCESS_BATCH_EVENTS), (rows) => rows.map(frame))
    }
  }

  /** A followed stream's route: `source` from the row `reads` gives, when the key may read it (undefined: hand over). */
  const followed = <Row>(reads: (request: Bun.BunRequest) => MaybePromise<Row | undefined>, source: (row: Row, key: ApiKeyCredentialRow, request: Bun.BunRequest) => FollowSource | undefined): Route =>
    route(FOLLOW_QUERY, (request) => [reads(request)] as const, ([row], key, request, requestId) => {
      const lastEventId = request.headers.get("last-event-id")
      if (row === undefined || (lastEventId !== null && !EVENT_ID.test(lastEventId))) return undefined
      const from = source(row, key, request)
      return from === undefined ? undefined : follow(from, Number(lastEventId ?? "0"), key, request, requestId)
    })

  return {
    routes: {
      "/v1/sandboxes/:sandbox_id": polled(
        (request) => [db.sandbox(param(request, "sandbox_id"))] as const,
        ([row], key) => row !== undefined && row.project_id === key.project_id ? sandboxToWire(row) : undefined
      ),
      "/v1/sandboxes/:sandbox_id/processes/:process_id": polled(
        (request) => [db.process(param(request, "process_id")), db.capabilities(param(request, "sandbox_id"))] as const,
        ([row, capabilities], key, request) =>
          inSandboxOfPath(row, key, request) ? processToWire(row, capabilities) : undefined
      ),
      "/v1/sandboxes/:sandbox_id/runtime-operations/:runtime_operation_id": polled(
        (request) => [db.runtimeOperation(param(request, "runtime_operation_id")), db.capabilities(param(request, "sandbox_id"))] as const,
        ([row, capabilities], key, request) =>
          inSandboxOfPath(row, key, request) ? runtimeOperationToWire(row, capabilities) : undefined
      ),
      // As in the handler: an operation is read with the key that caused it (the key that created its sandbox: the full stack).
      "/v1/operations/:operation_id": polled(
        (request) => [db.operation(param(request, "operation_id"))] as const,
        ([row], key) => visibleWith(row, key) ? operationToWire(row) : undefined
      ),
      "/v1/operations/:operation_id/events": followed(
        (request) => db.operation(param(request, "operation_id")),
        (row, key) => visibleWith(row, key) ? operationSource(row) : undefined
      ),
      "/v1/sandboxes/:sandbox_id/processes/:process_id/events": followed(
        (request) => db.process(param(request, "process_id")),
        (row, key, request) => inSandboxOfPath(row, key, request) ? processSource(row) : undefined
      )
    }
  }
}

/** A Last-Event-ID the contract takes (LastEventIdHeaders); anything else gets the full stack's 422. */
const EVENT_ID = /^\d{1,15}$/

/** What a followed stream reads: its events after a position, whether it is over, and the topic that wakes it. */
interface FollowSource {
  readonly topic: string
  readonly finished: () => MaybePromise<boolean>
  readonly eventsAfter: (after: number) => MaybePromise<ReadonlyArray<SseEvent>>
}

/** A row of the key's project under the sandbox the path names (a process or runtime operation under another sandbox's path is not there). */
const inSandboxOfPath = <R extends { readonly project_id: string; readonly sandbox_id: string }>(row: R | undefined, key: ApiKeyCredentialRow, request: Bun.BunRequest): row is R =>
  row !== undefined && row.project_id === key.project_id && row.sandbox_id === param(request, "sandbox_id")

/** An operation the key that caused it reads. */
const visibleWith = (row: OperationRow | undefined, key: ApiKeyCredentialRow): row is OperationRow =>
  row !== undefined && row.project_id === key.project_id && row.created_by_key_id === key.id

const encoder = new TextEncoder()

const param = (request: Bun.BunRequest, name: string): string => (request.params as Record<string, string>)[name] ?? ""

/** Hands the request to the server's `fetch` handler: the Effect HttpApi app. */
const fallThrough = (server: Bun.Server<unknown>, request: Request): Response | Promise<Response> => server.fetch(request)

/** FastReads over the configured engine's fast-read queries, closed with the scope (with the server). */
export const FastReadsScoped = (config: { readonly dataDir: string; readonly databaseUrl?: string | undefined }) =>
  Effect.gen(function*() {
    const queries = yield* openPolledReads(config)
    return makeFastReads({ queries, streams: yield* LiveStreams, runtime: yield* Effect.runtime<never>() })
  })
