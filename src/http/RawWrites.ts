/**
 * `PUT /v1/sandboxes/{id}/files/content` with the body streamed through (RawFiles.ts `writeRawStream`), up to
 * RAW_WRITE_MAX_BYTES (1 GiB by default) where the provider's wire streams writes, with the gateway holding a piece
 * at a time. HttpApi reads a declared body whole before its handler runs, so this is a Bun route ahead of the API
 * — but every check and every refusal is the API's own: the request is first passed to the API with an empty
 * body, marked as this gateway's check (a per-process secret) and carrying the declared length, and only its
 * go-ahead (which names the caller) lets the body be read. A refusal (401, 404, 409, 413 for a declared length
 * past the limit, 422 …) is answered as the API answered it, before a byte of the body is taken.
 */
import { Effect, Runtime, Schema } from "effect"
import { CurrentRequestId, isRetryableStatus } from "../domain/Errors.ts"
import { ApiKeyId, OrganizationId, ProjectId, SandboxId } from "../domain/Ids.ts"
import { RawWritten } from "../domain/Runtime.ts"
import type { Caller } from "../services/sandboxes/SandboxAccess.ts"
import { type RawWriteServices, writeRawStream } from "../services/sandboxes/RawFiles.ts"
import { guardedRoute } from "./GuardedRoute.ts"

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

/** What the API's go-ahead carries: who asked (the route writes as them) and the sandbox it checked (the route writes there). */
export const RawWriteGoAhead = Schema.Struct({ project_id: ProjectId, organization_id: OrganizationId, key_id: Schema.NullOr(ApiKeyId), sandbox_id: SandboxId })
const decodeGoAhead = Schema.decodeUnknownOption(RawWriteGoAhead)

type Path = typeof RAW_CONTENT_PATH | typeof PROJECT_RAW_CONTENT_PATH
type Route = (request: Bun.BunRequest<Path>, server: Bun.Server<unknown>) => Promise<Response>

/** `other` answers every method but PUT (a raw read). */
export const rawWriteRoute = (runtime: Runtime.Runtime<RawWriteServices>, other: (request: Request, server: Bun.Server<unknown>) => Response | Promise<Response>): Route => {
  const run = Runtime.runPromise(runtime)
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
    const caller: Caller = { projectId: goAhead.value.project_id, organizationId: goAhead.value.organization_id, keyId: goAhead.value.key_id }
    const q = new URL(request.url).searchParams
    const written = await run(
      Effect.either(writeRawStream(caller, goAhead.value.sandbox_id, {
        path: q.get("path") ?? "",
        mode: (q.get("mode") ?? "overwrite") as "create" | "overwrite" | "append",
        createParents: q.get("create_parents") === "true",
        body: request.body,
        declaredBytes: declared !== null && /^\d{1,15}$/.test(declared) ? Number(declared) : undefined
      })).pipe(Effect.locally(CurrentRequestId, requestId))
    )
    const out = { "x-request-id": requestId }
    if (written._tag === "Right") {
      const body = Schema.encodeSync(RawWritten)({ path: written.right.path, size_bytes: written.right.size_bytes })
      return Response.json(body, { status: written.right.created ? 201 : 200, headers: out })
    }
    const error = written.left
    const status = (error.constructor as unknown as { readonly status: number }).status
    return Response.json(
      { code: error.code, message: error.message, request_id: requestId, retryable: isRetryableStatus(status), ...(error.details === undefined ? {} : { details: error.details }) },
      { status, headers: out }
    )
  })
}
