/**
 * How the Promise layer talks to the gateway: the contract's own client (`HttpApiClient` over `http/Api.ts`), each
 * call run as a Promise whose failure is a GatewayError, retryable failures retried with backoff (the same call:
 * the same Idempotency-Key), and the waits for the operations a call starts.
 */
import { FetchHttpClient, type HttpApi, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Layer, ParseResult, type Schema } from "effect"
import { Api } from "../../src/http/Api.ts"
import { issuesSummary, readableIssues } from "../../src/domain/Issues.ts"
import type { OperationId, SandboxId } from "../../src/domain/Ids.ts"
import type { RuntimeOperation } from "../../src/domain/Runtime.ts"
import type { Operation } from "../../src/domain/Operation.ts"
import { GatewayError } from "./errors.ts"
import type { WebSocketConstructor } from "./terminal.ts"

/**
 * An id the client's user names (a string), typed as the contract's (`SandboxId`, …: src/domain/Ids.ts). Not
 * checked here: the contract's client checks the form as it encodes the path, as it did before ids were branded.
 */
export const namedId = <A>(kind: { readonly make: (id: string, options: { readonly disableValidation: true }) => A }, id: string): A =>
  kind.make(id, { disableValidation: true })

export interface ClientOptions {
  readonly baseUrl: string
  /** A project API key (`metal_sk_…`) and its project (`prj_…`). */
  readonly apiKey: string
  readonly projectId: string
  /** Attempts for a retryable failure (network errors, 429, 5xx), the first included. Default 4. */
  readonly attempts?: number
  /** The fetch to use (default: the global one). */
  readonly fetch?: typeof globalThis.fetch
  /**
   * The WebSocket to attach terminals with (default: the global one, which takes `{ headers }` in Bun and Node 22+;
   * on Node 20, the `ws` package's).
   */
  readonly webSocket?: WebSocketConstructor
}

const TERMINAL_OPERATION = new Set(["succeeded", "failed", "cancelled"])
/** How often a wait asks again. */
export const POLL_MS = 100

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
/** The pause before attempt `attempt + 1`: 100 ms, doubling. */
export const backoff = (attempt: number) => sleep(100 * 2 ** (attempt - 1))
export const idempotencyKey = () => `client-${crypto.randomUUID()}`

/** A request the client refuses before sending it, said as the gateway would say it (domain/Issues.ts): never a schema dump. */
export const invalid = (error: ParseResult.ParseError) => {
  const issues = readableIssues(ParseResult.ArrayFormatter.formatErrorSync(error))
  return new GatewayError("validation_error", issuesSummary(issues), 422, false, { issues })
}

/** Any failure of a raw call, as a GatewayError. */
export const toGatewayError = (e: unknown): GatewayError => {
  if (e instanceof GatewayError) return e
  // A request the contract refuses before it is sent (the typed client encodes it first).
  if (ParseResult.isParseError(e)) return invalid(e)
  const tagged = e as { _tag?: string; code?: unknown; message?: unknown; details?: unknown; reason?: string; response?: { status: number } }
  const status = (e as { constructor?: { status?: unknown } })?.constructor?.status
  if (typeof tagged?.code === "string" && typeof status === "number") {
    return new GatewayError(tagged.code, String(tagged.message), status, status >= 500 || status === 429, tagged.details)
  }
  if (tagged?._tag === "RequestError") return new GatewayError("network_error", `The gateway could not be reached: ${String(tagged.message)}`, 0, true)
  if (tagged?._tag === "ResponseError") {
    const s = tagged.response?.status ?? 0
    return new GatewayError(`http_${s}`, `The gateway answered ${s} unexpectedly`, s, s >= 500 || s === 429)
  }
  return new GatewayError("client_error", e instanceof Error ? e.message : String(e), 0, false)
}

/** A failure of a plain `fetch` (or of reading its body), as a GatewayError: fetch's TypeError is a network error. */
export const fetchFailure = (e: unknown): GatewayError => toGatewayError(e instanceof TypeError ? { _tag: "RequestError", message: e.message } : e)

type ApiGroups = typeof Api extends HttpApi.HttpApi<string, infer Groups, infer _E, infer _R> ? Groups : never
type ApiErrors = typeof Api extends HttpApi.HttpApi<string, infer _Groups, infer E, infer _R> ? E : never
/** The contract's client: every route of the API, typed (Effect). */
export type RawClient = HttpApiClient.Client<ApiGroups, ApiErrors, never>

/**
 * The gateway as the client's modules use it (one per client). Written out, not inferred: the inferred type (the
 * whole contract's client, its ids branded) is larger than TypeScript will write into a declaration file.
 */
export interface Transport {
  readonly baseUrl: string
  readonly attempts: number
  readonly fetch: typeof globalThis.fetch
  readonly authHeaders: { readonly authorization: string; readonly "x-metal-project-id": string }
  readonly webSocket: WebSocketConstructor | undefined
  readonly rawClient: Effect.Effect<RawClient>
  /** Runs a raw call; retryable failures are retried (the same call: the same Idempotency-Key). */
  readonly call: <A>(f: (client: RawClient) => Effect.Effect<A, unknown>) => Promise<A>
  readonly waitOperation: (operationId: OperationId, timeoutMs: number) => Promise<Schema.Schema.Type<typeof Operation>>
  readonly waitRuntimeOperation: (sandboxId: SandboxId, started: Schema.Schema.Type<typeof RuntimeOperation>) => Promise<NonNullable<Schema.Schema.Type<typeof RuntimeOperation>["result"]>>
}

export const makeTransport = (options: ClientOptions): Transport => {
  const attempts = Math.max(1, options.attempts ?? 4)
  const fetchImpl = options.fetch ?? globalThis.fetch
  const authHeaders = { authorization: `Bearer ${options.apiKey}`, "x-metal-project-id": options.projectId }
  const httpLayer = FetchHttpClient.layer.pipe(Layer.provide(Layer.succeed(FetchHttpClient.Fetch, fetchImpl)))
  const raw = HttpApiClient.make(Api, {
    baseUrl: options.baseUrl,
    transformClient: HttpClient.mapRequest(HttpClientRequest.setHeaders(authHeaders))
  })
  const rawClient = Effect.runSync(Effect.cached(Effect.provide(raw, httpLayer)))

  const call = async <A>(f: (client: RawClient) => Effect.Effect<A, unknown>): Promise<A> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await Effect.runPromise(Effect.flatMap(rawClient, f).pipe(Effect.mapError(toGatewayError), Effect.either)).then((r) => {
          if (r._tag === "Left") throw r.left
          return r.right
        })
      } catch (e) {
        const error = toGatewayError(e)
        if (!error.retryable || attempt >= attempts) throw error
        await backoff(attempt)
      }
    }
  }

  const waitOperation = async (operationId: OperationId, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const op = await call((c) => c.operations.get({ path: { operation_id: operationId } }))
      if (TERMINAL_OPERATION.has(op.state) || Date.now() > deadline) return op
      await sleep(POLL_MS)
    }
  }

  const waitRuntimeOperation = async (sandboxId: SandboxId, started: Schema.Schema.Type<typeof RuntimeOperation>) => {
    let op = started
    while (op.state === "queued" || op.state === "running") {
      await sleep(20)
      op = await call((c) => c.filesystem.getRuntimeOperation({ path: { sandbox_id: sandboxId, runtime_operation_id: op.id } }))
    }
    if (op.state !== "succeeded") {
      throw new GatewayError(op.error?.code ?? "runtime_operation_failed", op.error?.message ?? `The operation ended ${op.state}`, 0, op.error?.retryable ?? false, op.error?.details)
    }
    return op.result!
  }

  return {
    baseUrl: options.baseUrl,
    attempts,
    fetch: fetchImpl,
    authHeaders,
    // Node 20 has no global WebSocket (without --experimental-websocket): terminals there need `webSocket`.
    webSocket: options.webSocket ?? (globalThis.WebSocket as unknown as WebSocketConstructor | undefined),
    rawClient,
    call,
    waitOperation,
    waitRuntimeOperation
  }
}

