/**
 * `/v1/sandboxes/{id}/filesystem/…`: each file operation answers 202 with a runtime operation to poll; and the raw
 * file routes (`…/files/content`), answered in the request.
 */
import { HttpApiBuilder, HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Schema } from "effect"
import { asBody } from "../../domain/Bodies.ts"
import { apiError, RangeNotSatisfiable } from "../../domain/Errors.ts"
import {
  type DeleteFile,
  type ListFiles,
  type RawFileParams,
  type RawReadHeaders,
  type RawWriteParams,
  RawWritten,
  type ReadFile,
  RuntimeOperation,
  type WriteFile
} from "../../domain/Runtime.ts"
import { checkRawWrite, readRaw, writeRaw } from "../../services/sandboxes/RawFiles.ts"
import { RawWriteGoAhead, rawWriteCheck } from "../RawWrites.ts"
import { runtimeOperationOf, type RuntimeOperationInput, startRuntimeOperation } from "../../services/sandboxes/FileCommands.ts"
import { runtimeOperationJobKey, type RuntimeOperationRow } from "../../services/sandboxes/RuntimeOperations.ts"
import { sandboxCapabilities } from "../../services/sandboxes/SandboxRows.ts"
import { Api } from "../Api.ts"
import { answerWithin } from "../Sse.ts"
import { runtimeOperationToWire } from "../wire/Sandboxes.ts"
import type { IdempotencyHeaders } from "../groups/Common.ts"
import { accepted, keyCaller, type PlaneCaller, planeContext } from "./PlaneSupport.ts"
import type { RuntimeOperationId, SandboxId } from "../../domain/Ids.ts"

type Path = { readonly sandbox_id: SandboxId }

/** The file routes' handlers for a caller: a project key's, or a member's on the project path (ProjectRuntimeHttp.ts). */
export const filesystemHandlers = Effect.gen(function*() {
  const { idempotency, runner, provide } = yield* planeContext
  const wire = (row: RuntimeOperationRow) => Effect.map(sandboxCapabilities(row.sandbox_id), (caps) => runtimeOperationToWire(row, caps))
  const respond = (caller: PlaneCaller, sandboxId: SandboxId, op: Schema.Schema.Type<typeof RuntimeOperation>) =>
    Effect.zipRight(runner.runNow(runtimeOperationJobKey(op.kind, op.id)), accepted(RuntimeOperation, op, `${caller.base}/sandboxes/${sandboxId}/runtime-operations/${op.id}`))
  /** Writes and deletes take an optional Idempotency-Key; reads and lists are safe to repeat. */
  const start = (caller: PlaneCaller, sandboxId: SandboxId, operation: RuntimeOperationInput, key: string | undefined, idempotent: boolean) =>
    Effect.gen(function*() {
      const run = Effect.flatMap(startRuntimeOperation(caller, sandboxId, operation), wire)
      const op = idempotent
        ? yield* idempotency.remember({
          principalId: caller.principalId,
          scope: `${operation.kind}:${caller.projectId}:${sandboxId}`,
          key,
          required: false,
          request: operation.request,
          schema: RuntimeOperation,
          run
        })
        : yield* run
      return yield* respond(caller, sandboxId, op)
    }).pipe(provide)
  type Keyed = { readonly headers: typeof IdempotencyHeaders.Type; readonly path: Path }
  return {
    read: (caller: PlaneCaller, { path, payload }: { readonly path: Path; readonly payload: typeof ReadFile.Type }) =>
      start(caller, path.sandbox_id, { kind: "filesystem_read", request: payload }, undefined, false),
    list: (caller: PlaneCaller, { path, payload }: { readonly path: Path; readonly payload: typeof ListFiles.Type }) =>
      start(caller, path.sandbox_id, { kind: "filesystem_list", request: payload }, undefined, false),
    write: (caller: PlaneCaller, { headers, path, payload }: Keyed & { readonly payload: typeof WriteFile.Type }) =>
      start(caller, path.sandbox_id, { kind: "filesystem_write", request: payload }, headers["idempotency-key"], true),
    delete: (caller: PlaneCaller, { headers, path, payload }: Keyed & { readonly payload: typeof DeleteFile.Type }) =>
      start(caller, path.sandbox_id, { kind: "filesystem_delete", request: payload }, headers["idempotency-key"], true),
    getRuntimeOperation: (caller: PlaneCaller, { path }: { readonly path: Path & { readonly runtime_operation_id: RuntimeOperationId } }) =>
      Effect.flatMap(runtimeOperationOf(caller, path.sandbox_id, path.runtime_operation_id), wire).pipe(provide),
    readContent: (caller: PlaneCaller, { headers, path, urlParams }: { readonly headers: typeof RawReadHeaders.Type; readonly path: Path; readonly urlParams: typeof RawFileParams.Type }) =>
      Effect.gen(function*() {
        // Each call into the sandbox answers in time (not the whole handler: the 416's header is set on this fiber).
        const read = yield* answerWithin(readRaw(caller, path.sandbox_id, urlParams.path, { range: headers.range, ifNoneMatch: headers["if-none-match"] }))
        const common = { ...(read.etag === undefined ? {} : { etag: read.etag }), "accept-ranges": "bytes", "cache-control": "no-store" }
        if (read.notModified) return HttpServerResponse.empty({ status: 304, headers: common })
        if (read.range === "unsatisfiable") {
          // The envelope, with the size a client needs to ask again.
          yield* HttpApp.appendPreResponseHandler((_req, res) => Effect.succeed(HttpServerResponse.setHeader(res, "content-range", `bytes */${read.size}`)))
          return yield* apiError(RangeNotSatisfiable, "range_not_satisfiable", `The range is malformed or outside the file's ${read.size} bytes`, { size_bytes: read.size })
        }
        const [from, to] = read.range === undefined ? [0, read.size - 1] : [read.range.start, read.range.end]
        const length = Math.max(0, to - from + 1)
        const headersOut = {
          ...common,
          "content-length": String(length),
          ...(read.range === undefined ? {} : { "content-range": `bytes ${from}-${to}/${read.size}` })
        }
        // One read's worth comes whole, with its Content-Length; more is streamed (RawFiles.ts `open`: Bun sends a
        // streamed body chunked, without Content-Length).
        const body: BodyInit = length === 0 ? new Uint8Array() : length <= read.piece ? asBody(yield* answerWithin(read.readPiece(from, to))) : yield* answerWithin(read.open(from, to))
        return HttpServerResponse.raw(new Response(body, { status: read.range === undefined ? 200 : 206, headers: { "content-type": "application/octet-stream", ...headersOut } }))
      }).pipe(provide),
    writeContent: (caller: PlaneCaller, { path, payload, urlParams }: { readonly path: Path; readonly payload: Uint8Array; readonly urlParams: typeof RawWriteParams.Type }) =>
      Effect.gen(function*() {
        const input = { path: urlParams.path, mode: urlParams.mode, createParents: urlParams.create_parents }
        // The gateway's own check before it streams the body (RawWrites.ts): everything the API checks, then who asked.
        const check = rawWriteCheck((yield* HttpServerRequest.HttpServerRequest).headers)
        if (check !== undefined) {
          const { sandbox, provider, limit } = yield* checkRawWrite(caller, path.sandbox_id, { ...input, declaredBytes: check.declaredBytes })
          return yield* HttpServerResponse.schemaJson(RawWriteGoAhead)({
            project_id: caller.projectId,
            organization_id: caller.organizationId,
            key_id: caller.keyId,
            sandbox_id: path.sandbox_id,
            limit_bytes: limit,
            provider: sandbox.provider,
            streams: provider.writeFileStream !== undefined
          }).pipe(Effect.orDie)
        }
        const written = yield* writeRaw(caller, path.sandbox_id, { ...input, data: payload })
        return yield* HttpServerResponse.schemaJson(RawWritten)({ path: written.path, size_bytes: written.size_bytes }, { status: written.created ? 201 : 200 }).pipe(Effect.orDie)
      }).pipe(answerWithin, provide)
  }
})

export const FilesystemLive = HttpApiBuilder.group(Api, "filesystem", (handlers) =>
  Effect.gen(function*() {
    const h = yield* filesystemHandlers
    return handlers
      .handle("read", (request) => Effect.flatMap(keyCaller, (caller) => h.read(caller, request)))
      .handle("list", (request) => Effect.flatMap(keyCaller, (caller) => h.list(caller, request)))
      .handle("write", (request) => Effect.flatMap(keyCaller, (caller) => h.write(caller, request)))
      .handle("delete", (request) => Effect.flatMap(keyCaller, (caller) => h.delete(caller, request)))
      .handle("getRuntimeOperation", (request) => Effect.flatMap(keyCaller, (caller) => h.getRuntimeOperation(caller, request)))
      .handle("readContent", (request) => Effect.flatMap(keyCaller, (caller) => h.readContent(caller, request)))
      .handle("writeContent", (request) => Effect.flatMap(keyCaller, (caller) => h.writeContent(caller, request)))
  }))
