/**
 * `PUT /v1/sandboxes/{id}/files/content` with the body streamed through (RawFiles.ts `writeRawStream`), up to
 * RAW_WRITE_MAX_BYTES (1 GiB by default) where the provider's wire streams writes, with the gateway holding a piece
 * at a time. HttpApi reads a declared body whole before its handler runs, so this is a Bun route ahead of the API
 * — but every check and every refusal is the API's own: the request is first passed to the API with an empty
 * body, marked as this gateway's check (a per-process secret) and carrying the declared length, and only its
 * go-ahead (which names the caller) lets the body be read. A refusal (401, 404, 409, 413 for a declared length
 * past the limit, 422 …) is answered as the API answered it, before a byte of the body is taken.
 *
 * A body of stated length is bounded by HTTP framing: it goes to the provider's wire untouched. An unsized (chunked)
 * body to a provider whose wire streams is counted by Bun, not in JavaScript: this route passes it, as it comes, to
 * this process's *intake* (a second server, on loopback, whose maxRequestBodySize is the raw write limit, writing
 * only for a single-use ticket this route made), whose handler streams its own request body to the provider. Past the limit Bun
 * cuts the body there — the provider's upload breaks, so nothing is written — and answers the hop 413 itself, which
 * this route answers in the envelope. Counted in a JavaScript stage instead, 1 GiB took the gateway's RSS up by
 * 120–190 MiB (chunks the collector left for later, and fetch reading its body ahead of the socket); passed
 * through, by 14–17 MiB.
 */
import { Effect, Runtime, Schema } from "effect"
import { CurrentRequestId, isRetryableStatus } from "../domain/Errors.ts"
import { ApiKeyId, OrganizationId, ProjectId, SandboxId } from "../domain/Ids.ts"
import { RawWritten } from "../domain/Runtime.ts"
import type { Caller } from "../services/sandboxes/SandboxAccess.ts"
import { type RawWriteServices, tooLarge, writeRawStream } from "../services/sandboxes/RawFiles.ts"
import { EDGE_SERVE_OPTIONS } from "./Edge.ts"
import { guardedRoute } from "./GuardedRoute.ts"
import { IDLE_SECONDS } from "./Sse.ts"

export const RAW_CONTENT_PATH = "/v1/sandboxes/:sandbox_id/files/content"
/** The same route on the project path (a member's, the dashboard's uploads). */
export const PROJECT_RAW_CONTENT_PATH = "/v1/projects/:project_id/sandboxes/:sandbox_id/files/content"

const CHECK_HEADER = "x-gateway-raw-write-check"
const LENGTH_HEADER = "x-gateway-declared-length"
/** Known only to this process: a client cannot pass its request off as the gateway's check. */
const CHECK_SECRET = crypto.randomUUID()

/** The gateway's own check of a streamed write: the declared length when it is one (else undefined). */
export const rawWriteCheck = (headers: Readonly<Record<string, string | undefined>>): { readonly declaredBytes: number | undefined } | undefined => {
  if (headers[CHECK_HEADER] !== CHECK_SECRET) return undefined
  const declared = Number(headers[LENGTH_HEADER] ?? "")
  return { declaredBytes: Number.isSafeInteger(declared) && declared >= 0 ? declared : undefined }
}

/**
 * What the API's go-ahead carries: who asked (the route writes as them), the sandbox it checked (the route writes
 * there), and the write's limit there: `limit_bytes`, on `provider`, counted natively (the intake) when `streams`.
 */
export const RawWriteGoAhead = Schema.Struct({
  project_id: ProjectId,
  organization_id: OrganizationId,
  key_id: Schema.NullOr(ApiKeyId),
  sandbox_id: SandboxId,
  limit_bytes: Schema.Int,
  provider: Schema.NullOr(Schema.String),
  streams: Schema.Boolean
})
const decodeGoAhead = Schema.decodeUnknownOption(RawWriteGoAhead)

/** A write the route hands its intake: the go-ahead, the write's parameters and the request id. */
interface IntakeTicket {
  readonly go: typeof RawWriteGoAhead.Type
  readonly path: string
  readonly mode: "create" | "overwrite" | "append"
  readonly createParents: boolean
  readonly requestId: string
}
/** The intake's request names its ticket by a single-use random key; anything else is answered 404. */
const INTAKE_HEADER = "x-gateway-raw-write-ticket"
/** On every answer the intake's handler gives: an answer without it is Bun's own (a body past the limit). */
const ANSWERED_HEADER = "x-gateway-intake-answer"
/** How long a 413 waits for the intake's broken write to end (so that nothing is half-written when it is answered). */
const CUT_SETTLE_MS = 30_000

/** The error envelope, with its request id. */
const envelope = (requestId: string, status: number, error: { readonly code: string; readonly message: string; readonly retryable: boolean; readonly details?: unknown }) =>
  Response.json({ code: error.code, message: error.message, request_id: requestId, retryable: error.retryable, ...(error.details === undefined ? {} : { details: error.details }) }, {
    status,
    headers: { "x-request-id": requestId }
  })

/** An API error (its class says its status) as the error envelope. */
const errorAnswer = (requestId: string, error: { readonly code: string; readonly message: string; readonly details?: unknown }) => {
  const status = (error.constructor as unknown as { readonly status: number }).status
  return envelope(requestId, status, { code: error.code, message: error.message, retryable: isRetryableStatus(status), ...(error.details === undefined ? {} : { details: error.details }) })
}

type Path = typeof RAW_CONTENT_PATH | typeof PROJECT_RAW_CONTENT_PATH
type Route = (request: Bun.BunRequest<Path>, server: Bun.Server<unknown>) => Promise<Response>

/** `other` answers every method but PUT (a raw read). */
export const rawWriteRoute = (runtime: Runtime.Runtime<RawWriteServices>, other: (request: Request, server: Bun.Server<unknown>) => Response | Promise<Response>): Route => {
  const run = Runtime.runPromise(runtime)

  /** The write itself, as the go-ahead's caller: its answer (the written file, or the error envelope). */
  const write = async (ticket: IntakeTicket, body: ReadableStream<Uint8Array> | null, declaredBytes: number | undefined, countedByBun = false): Promise<Response> => {
    const { go, requestId } = ticket
    const caller: Caller = { projectId: go.project_id, organizationId: go.organization_id, keyId: go.key_id }
    const written = await run(
      Effect.either(writeRawStream(caller, go.sandbox_id, { path: ticket.path, mode: ticket.mode, createParents: ticket.createParents, body, declaredBytes, countedByBun }))
        .pipe(Effect.locally(CurrentRequestId, requestId))
    )
    if (written._tag === "Right") {
      const out = Schema.encodeSync(RawWritten)({ path: written.right.path, size_bytes: written.right.size_bytes })
      return Response.json(out, { status: written.right.created ? 201 : 200, headers: { "x-request-id": requestId } })
    }
    return errorAnswer(requestId, written.left)
  }

  /** Tickets handed to the intake, by key: taken once, and settled when the intake's write has ended. */
  const tickets = new Map<string, { readonly ticket: IntakeTicket; taken: boolean; readonly settle: () => void; readonly settled: Promise<void> }>()
  /** The intake of unsized bodies up to `limit` bytes (one per limit: RAW_WRITE_MAX_BYTES, so one). */
  const intakes = new Map<number, Bun.Server<unknown>>()
  const intakeFor = (limit: number) => {
    const known = intakes.get(limit)
    if (known !== undefined) return known
    const intake = Bun.serve({
      ...EDGE_SERVE_OPTIONS,
      hostname: "127.0.0.1",
      port: 0,
      maxRequestBodySize: limit,
      // As the gateway's own server: a hop that stays quiet longer was given up by the client anyway.
      idleTimeout: IDLE_SECONDS,
      fetch: async (request) => {
        const entry = tickets.get(request.headers.get(INTAKE_HEADER) ?? "")
        if (entry === undefined || entry.taken) return new Response(null, { status: 404, headers: { [ANSWERED_HEADER]: "1" } })
        entry.taken = true
        try {
          const answer = await write(entry.ticket, request.body, undefined, true)
          const headers = new Headers(answer.headers)
          headers.set(ANSWERED_HEADER, "1")
          return new Response(answer.body, { status: answer.status, headers })
        } finally {
          entry.settle()
        }
      }
    })
    intakes.set(limit, intake)
    return intake
  }

  /** An unsized body to a provider whose wire streams: through the intake, which Bun cuts at the limit. */
  const writeThroughIntake = async (ticket: IntakeTicket, body: ReadableStream<Uint8Array> | null): Promise<Response> => {
    const key = crypto.randomUUID()
    let settle = () => {}
    const settled = new Promise<void>((resolve) => (settle = resolve))
    const entry = { ticket, taken: false, settle, settled }
    tickets.set(key, entry)
    try {
      let answer: Response
      try {
        answer = await fetch(intakeFor(ticket.go.limit_bytes).url, { method: "PUT", headers: { [INTAKE_HEADER]: key }, body, duplex: "half" } as RequestInit)
      } catch {
        // The client's body broke off (the intake's write broke with it: nothing was written).
        if (entry.taken) await Promise.race([entry.settled, Bun.sleep(CUT_SETTLE_MS)])
        return envelope(ticket.requestId, 400, { code: "invalid_request", message: "The request body broke off before its end; nothing was written", retryable: false })
      }
      if (answer.headers.get(ANSWERED_HEADER) !== null) {
        const headers = new Headers(answer.headers)
        headers.delete(ANSWERED_HEADER)
        return new Response(answer.body, { status: answer.status, headers })
      }
      // Bun's own answer: the body went past the limit and was cut there (the upload to the provider broke with it).
      await answer.body?.cancel().catch(() => undefined)
      if (entry.taken) await Promise.race([entry.settled, Bun.sleep(CUT_SETTLE_MS)])
      if (answer.status !== 413) return envelope(ticket.requestId, 500, { code: "internal_error", message: "Internal server error", retryable: true })
      return errorAnswer(ticket.requestId, tooLarge(ticket.go.limit_bytes, ticket.go.provider))
    } finally {
      tickets.delete(key)
    }
  }

  return guardedRoute("raw write", async (request: Bun.BunRequest<Path>, server: Bun.Server<unknown>): Promise<Response> => {
    // Not a raw body (a read, or the wrong media type): the API answers it as usual (415 for the latter).
    if (request.method !== "PUT" || !(request.headers.get("content-type") ?? "").toLowerCase().startsWith("application/octet-stream")) return await other(request, server)
    const headers = new Headers(request.headers)
    headers.delete("content-length")
    headers.delete("transfer-encoding")
    headers.set(CHECK_HEADER, CHECK_SECRET)
    // A stated length is what HTTP framing ends the body at (Bun refuses a request that also says chunked; a
    // transfer-encoding here is not taken as framed by the length, whatever the server did with it).
    const declared = request.headers.has("transfer-encoding") ? null : request.headers.get("content-length")
    if (declared !== null) headers.set(LENGTH_HEADER, declared)
    const check = await server.fetch(new Request(request.url, { method: "PUT", headers, body: new Uint8Array() }))
    if (check.status !== 200) return check
    const goAhead = decodeGoAhead(await check.json())
    const requestId = check.headers.get("x-request-id") ?? `req_${crypto.randomUUID().replaceAll("-", "")}`
    if (goAhead._tag === "None") return Response.json({ code: "internal_error", message: "Internal server error", request_id: requestId, retryable: true }, { status: 500 })
    const q = new URL(request.url).searchParams
    const mode = q.get("mode") ?? "overwrite"
    const ticket: IntakeTicket = {
      go: goAhead.value,
      path: q.get("path") ?? "",
      // The API checked the mode (an unknown one was refused before the go-ahead).
      mode: mode === "create" || mode === "append" ? mode : "overwrite",
      createParents: q.get("create_parents") === "true",
      requestId
    }
    if (declared === null && goAhead.value.streams) return await writeThroughIntake(ticket, request.body)
    return await write(ticket, request.body, declared !== null && /^\d{1,15}$/.test(declared) ? Number(declared) : undefined)
  })
}
