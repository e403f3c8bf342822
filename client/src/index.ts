/**
 * A typed client for Sandbox Gateway. `raw` is the server's own HttpApi contract turned into a client
 * (`HttpApiClient`), so its routes, parameters and shapes cannot drift from the server's; the Promise layer on
 * top does what is awkward with raw calls: create-and-wait, run-and-follow, files beyond one call's size,
 * endpoints that are ready to use, typed errors, and retries of retryable failures with the same
 * Idempotency-Key (a retried create never makes a second sandbox).
 *
 *   const gw = createClient({ baseUrl: "http://127.0.0.1:8080", apiKey: "metal_sk_…", projectId: "prj_…" })
 *   const sandbox = await gw.sandboxes.create({ source: { kind: "environment", environment: "metal/base" },
 *     resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 600 } })
 *   const { exitCode, stdout } = await sandbox.exec(["python3", "-c", "print(6*7)"], { onOutput: (s, t) => process.stdout.write(t) })
 *   await sandbox.destroy()
 */
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Layer, ParseResult, Schema } from "effect"
import { Api } from "../../src/http/Api.ts"
import type { Endpoint, Process, RuntimeOperation } from "../../src/domain/Runtime.ts"
import { type Sandbox as SandboxWire, SandboxRequest } from "../../src/domain/Sandbox.ts"
import { fromEnvelope, GatewayError } from "./errors.ts"
import { followEvents } from "./sse.ts"

export { GatewayError } from "./errors.ts"

export interface ClientOptions {
  readonly baseUrl: string
  /** A project API key (`metal_sk_…`) and its project (`prj_…`). */
  readonly apiKey: string
  readonly projectId: string
  /** Attempts for a retryable failure (network errors, 429, 5xx), the first included. Default 4. */
  readonly attempts?: number
  /** The fetch to use (default: the global one). */
  readonly fetch?: typeof globalThis.fetch
}

export type SandboxRecord = Schema.Schema.Type<typeof SandboxWire>
export type CreateSandbox = Schema.Schema.Encoded<typeof SandboxRequest>
export type ProcessRecord = Schema.Schema.Type<typeof Process>
export type EndpointRecord = Schema.Schema.Type<typeof Endpoint>

export interface ExecOptions {
  readonly cwd?: string
  readonly env?: Readonly<Record<string, string>>
  readonly timeoutSeconds?: number
  /**
   * Standard input: written to the process as it comes (in pieces of at most 1 MiB), then closed. Needs a
   * provider that takes input (409 capability_unsupported otherwise).
   */
  readonly stdin?: string | Uint8Array | AsyncIterable<Uint8Array>
  /** Each piece of output as it is written (live: the process's event stream is followed). */
  readonly onOutput?: (stream: "stdout" | "stderr", text: string, bytes: Uint8Array) => void
}

export interface ExecResult {
  readonly processId: string
  readonly state: ProcessRecord["state"]
  readonly exitCode: number | null
  readonly stdout: string
  readonly stderr: string
}

const TERMINAL_OPERATION = new Set(["succeeded", "failed", "cancelled"])
const TERMINAL_PROCESS = new Set(["succeeded", "failed", "cancelled", "timed_out"])
const POLL_MS = 100

const MAX_OUTPUT_BYTES = 10 * 1024 * 1024
/** The API takes at most 1 MiB of input a call. */
const STDIN_PIECE = 1024 * 1024

/** A create request checked (and its defaults filled) before it is sent: a mistake is a validation_error here. */
const decodeRequest = (request: CreateSandbox) => {
  const decoded = Schema.decodeUnknownEither(SandboxRequest)(request)
  if (decoded._tag === "Left") throw new GatewayError("validation_error", ParseResult.TreeFormatter.formatErrorSync(decoded.left), 422, false)
  return decoded.right
}

const idempotencyKey = () => `client-${crypto.randomUUID()}`
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Any failure of a raw call, as a GatewayError. */
const toGatewayError = (e: unknown): GatewayError => {
  if (e instanceof GatewayError) return e
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

export const createClient = (options: ClientOptions) => {
  const attempts = Math.max(1, options.attempts ?? 4)
  const fetchImpl = options.fetch ?? globalThis.fetch
  const authHeaders = { authorization: `Bearer ${options.apiKey}`, "x-metal-project-id": options.projectId }
  const httpLayer = FetchHttpClient.layer.pipe(Layer.provide(Layer.succeed(FetchHttpClient.Fetch, fetchImpl)))
  /** The contract's client: every route of the API, typed (Effect). */
  const raw = HttpApiClient.make(Api, {
    baseUrl: options.baseUrl,
    transformClient: HttpClient.mapRequest(HttpClientRequest.setHeaders(authHeaders))
  })
  type Raw = Effect.Effect.Success<typeof raw>
  const rawClient = Effect.runSync(Effect.cached(Effect.provide(raw, httpLayer)))

  /** Runs a raw call; retryable failures are retried (the same call: the same Idempotency-Key). */
  const call = async <A>(f: (client: Raw) => Effect.Effect<A, unknown>): Promise<A> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await Effect.runPromise(Effect.flatMap(rawClient, f).pipe(Effect.mapError(toGatewayError), Effect.either)).then((r) => {
          if (r._tag === "Left") throw r.left
          return r.right
        })
      } catch (e) {
        const error = toGatewayError(e)
        if (!error.retryable || attempt >= attempts) throw error
        await sleep(100 * 2 ** (attempt - 1))
      }
    }
  }

  const waitOperation = async (operationId: string, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const op = await call((c) => c.operations.get({ path: { operation_id: operationId } }))
      if (TERMINAL_OPERATION.has(op.state) || Date.now() > deadline) return op
      await sleep(POLL_MS)
    }
  }

  const waitRuntimeOperation = async (sandboxId: string, started: Schema.Schema.Type<typeof RuntimeOperation>) => {
    let op = started
    while (op.state === "queued" || op.state === "running") {
      await sleep(20)
      op = await call((c) => c.filesystem.getRuntimeOperation({ path: { sandbox_id: sandboxId, runtime_operation_id: op.id } }))
    }
    if (op.state !== "succeeded") {
      throw new GatewayError(op.error?.code ?? "runtime_operation_failed", op.error?.message ?? `The file operation ended ${op.state}`, 0, op.error?.retryable ?? false, op.error?.details)
    }
    return op.result!
  }

  const handle = (record: SandboxRecord) => {
    const id = record.id
    const mutate = async (action: "pause" | "resume" | "delete", waitMs = 120_000) => {
      // Pause, resume and delete are idempotent by state: sending one again is safe without a key.
      const mutation = await call((c) => (action === "delete" ? c.sandboxes.delete({ path: { sandbox_id: id } }) : c.sandboxes[action]({ path: { sandbox_id: id } })))
      const op = await waitOperation(mutation.operation.id, waitMs)
      if (op.state !== "succeeded") throw new GatewayError(op.error?.code ?? "operation_failed", op.error?.message ?? `The ${action} ended ${op.state}`, 0, op.retryable, op.error?.details)
      return op
    }

    /** One call of the raw file route; a failure is a GatewayError (retried, like the others, when retryable). */
    const raw = async (method: "GET" | "PUT", path: string, headers: Record<string, string> = {}, body?: Buffer, query = ""): Promise<Response> => {
      const url = `${options.baseUrl}/v1/sandboxes/${id}/files/content?path=${encodeURIComponent(path)}${query}`
      for (let attempt = 1; ; attempt++) {
        let error: GatewayError
        try {
          const response = await fetchImpl(url, { method, headers: { ...authHeaders, ...headers }, ...(body === undefined ? {} : { body: body as unknown as BodyInit }) })
          if (response.status < 300) return response
          error = fromEnvelope(response.status, await response.json().catch(() => undefined), response.headers.get("x-request-id") ?? undefined)
        } catch (e) {
          error = toGatewayError(e instanceof TypeError ? { _tag: "RequestError", message: e.message } : e)
        }
        if (!error.retryable || attempt >= attempts) throw error
        await sleep(100 * 2 ** (attempt - 1))
      }
    }

    /** Writes `input` to a process's stdin in ≤ 1 MiB pieces, in order, then closes it; a process that ended stops it. */
    const feed = async (processId: string, input: string | Uint8Array | AsyncIterable<Uint8Array>) => {
      const write = (bytes: Uint8Array, eof: boolean) =>
        call((c) => c.processes.stdin({ path: { sandbox_id: id, process_id: processId }, payload: { data_base64: Buffer.from(bytes).toString("base64"), eof } }))
      const pieces = typeof input === "string" ? [new TextEncoder().encode(input)] : input instanceof Uint8Array ? [input] : input
      try {
        for await (const piece of pieces) {
          for (let at = 0; at < piece.length; at += STDIN_PIECE) await write(piece.subarray(at, at + STDIN_PIECE), false)
        }
        await write(new Uint8Array(), true)
      } catch (e) {
        // The process stopped reading (it ended): what is left has nowhere to go, as with a pipe in a shell.
        if (!(e instanceof GatewayError && e.code === "invalid_process_state")) throw e
      }
    }

    return {
      id,
      record,
      /** The sandbox as the gateway has it now. */
      refresh: () => call((c) => c.sandboxes.get({ path: { sandbox_id: id } })),
      /**
       * Runs argv (not a shell line: use ["sh", "-c", "…"] for one), follows its output live, and resolves with its
       * exit code and output once it ends.
       */
      exec: async (command: ReadonlyArray<string>, o: ExecOptions = {}): Promise<ExecResult> => {
        const started = await call((c) =>
          c.processes.start({
            path: { sandbox_id: id },
            urlParams: {},
            headers: { "idempotency-key": idempotencyKey() },
            payload: {
              command: [...command],
              ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
              ...(o.env !== undefined ? { environment: { ...o.env } } : {}),
              timeout_seconds: o.timeoutSeconds ?? 300,
              max_output_bytes: MAX_OUTPUT_BYTES,
              stdin: o.stdin !== undefined
            }
          }))
        const feeding = o.stdin === undefined ? Promise.resolve() : feed(started.id, o.stdin)
        const out = { stdout: [] as Array<Uint8Array>, stderr: [] as Array<Uint8Array> }
        const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() }
        await followEvents(fetchImpl, `${options.baseUrl}/v1/sandboxes/${id}/processes/${started.id}/events?follow=true`, authHeaders, (type, data) => {
          if (type !== "stdout" && type !== "stderr") return
          const bytes = Uint8Array.from(Buffer.from((data as { data_base64: string }).data_base64, "base64"))
          out[type].push(bytes)
          o.onOutput?.(type, decoders[type].decode(bytes, { stream: true }), bytes)
        })
        await feeding
        let process = await call((c) => c.processes.get({ path: { sandbox_id: id, process_id: started.id } }))
        while (!TERMINAL_PROCESS.has(process.state)) {
          await sleep(POLL_MS)
          process = await call((c) => c.processes.get({ path: { sandbox_id: id, process_id: started.id } }))
        }
        const text = (chunks: Array<Uint8Array>) => Buffer.concat(chunks).toString("utf8")
        return { processId: process.id, state: process.state, exitCode: process.exit_code, stdout: text(out.stdout), stderr: text(out.stderr) }
      },
      files: {
        /** The file's bytes as they stream in (`GET …/files/content`); a Range as `{start, end}` (inclusive). */
        readStream: async (path: string, range?: { readonly start: number; readonly end?: number }): Promise<ReadableStream<Uint8Array>> => {
          const response = await raw("GET", path, range === undefined ? {} : { range: `bytes=${range.start}-${range.end ?? ""}` })
          return response.body ?? new ReadableStream({ start: (c) => c.close() })
        },
        /** The whole file, through the raw route (no base64, no operation to poll). */
        read: async (path: string): Promise<Uint8Array> => new Uint8Array(await (await raw("GET", path)).arrayBuffer()),
        /**
         * Writes the file (`PUT …/files/content`), making its parents; `mode` create (a GatewayError `file_exists`
         * if it exists), overwrite (default) or append. At most the provider's largest write (10 MiB today).
         */
        write: async (path: string, data: Uint8Array | string, o: { readonly mode?: "create" | "overwrite" | "append" } = {}): Promise<{ readonly sizeBytes: number }> => {
          const body = typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data)
          const response = await raw("PUT", path, { "content-type": "application/octet-stream" }, body, `&mode=${o.mode ?? "overwrite"}&create_parents=true`)
          return { sizeBytes: ((await response.json()) as { size_bytes: number }).size_bytes }
        },
        list: async (path: string, o: { readonly recursive?: boolean } = {}) => {
          const started = await call((c) =>
            c.filesystem.list({ path: { sandbox_id: id }, payload: { path, recursive: o.recursive ?? false, max_entries: 10_000 } }))
          return ((await waitRuntimeOperation(id, started)) as { entries: ReadonlyArray<unknown> }).entries
        }
      },
      /** Serves `port` of the sandbox at a URL; resolves once the endpoint is active. */
      expose: async (port: number, o: { readonly leaseSeconds?: number } = {}): Promise<EndpointRecord> => {
        let endpoint = await call((c) =>
          c.endpoints.create({ path: { sandbox_id: id }, headers: { "idempotency-key": idempotencyKey() }, payload: { port, protocol: "http", lease_seconds: o.leaseSeconds ?? 3600 } }))
        while (endpoint.state === "provisioning") {
          await sleep(POLL_MS)
          const list = await call((c) => c.endpoints.list({ path: { sandbox_id: id }, urlParams: { limit: 100 } }))
          endpoint = list.endpoints.find((e) => e.id === endpoint.id) ?? endpoint
        }
        if (endpoint.state !== "active") throw new GatewayError(endpoint.error?.code ?? "endpoint_failed", endpoint.error?.message ?? `The endpoint is ${endpoint.state}`, 0, false)
        return endpoint
      },
      extend: (seconds: number) => call((c) => c.sandboxes.extend({ path: { sandbox_id: id }, payload: { runtime_timeout_seconds: seconds } })),
      metrics: () => call((c) => c.sandboxes.metrics({ path: { sandbox_id: id } })),
      pause: () => mutate("pause"),
      resume: () => mutate("resume"),
      destroy: () => mutate("delete")
    }
  }

  return {
    /** The contract's client (Effect): every route of the API, typed. */
    raw: rawClient,
    sandboxes: {
      /**
       * Creates a sandbox and (unless `wait: false`) resolves once it is ready. Retried after a lost answer with
       * the same Idempotency-Key, so one request makes at most one sandbox.
       */
      create: async (request: CreateSandbox, o: { readonly wait?: boolean; readonly timeoutMs?: number } = {}) => {
        const payload = decodeRequest(request)
        const key = idempotencyKey()
        const mutation = await call((c) => c.sandboxes.create({ headers: { "idempotency-key": key }, payload }))
        if (o.wait === false) return handle(mutation.sandbox)
        const op = await waitOperation(mutation.operation.id, o.timeoutMs ?? 300_000)
        if (op.state !== "succeeded") {
          throw new GatewayError(op.error?.code ?? "sandbox_failed", op.error?.message ?? `The sandbox could not be created (${op.state})`, 0, op.retryable, op.error?.details)
        }
        return handle(await call((c) => c.sandboxes.get({ path: { sandbox_id: mutation.sandbox.id } })))
      },
      get: async (id: string) => handle(await call((c) => c.sandboxes.get({ path: { sandbox_id: id } }))),
      list: (filter: { readonly state?: ReadonlyArray<SandboxRecord["state"]>; readonly provider?: SandboxRecord["provider"] & string; readonly limit?: number; readonly cursor?: string } = {}) =>
        call((c) =>
          c.sandboxes.list({
            urlParams: {
              limit: filter.limit ?? 50,
              ...(filter.cursor !== undefined ? { cursor: filter.cursor } : {}),
              ...(filter.state !== undefined ? { state: filter.state } : {}),
              ...(filter.provider !== undefined ? { provider: filter.provider } : {})
            }
          }))
    }
  }
}

export type GatewayClient = ReturnType<typeof createClient>
export type SandboxHandle = Awaited<ReturnType<GatewayClient["sandboxes"]["get"]>>
