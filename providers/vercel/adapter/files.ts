/**
 * Vercel files through the sandbox's session:
 * - read: `POST …/fs/read {path}` answers the whole file as bytes (404 when it is missing); the requested range is
 *   kept and the rest of the body is not read once the size is known (Content-Length).
 * - write: one file as a gzipped USTAR tar, `POST …/fs/write` with `Content-Type: application/gzip` and
 *   `x-cwd: /` (the entry's name is the path without its leading slash). Extraction would make missing parents on
 *   its own, and Vercel has no stat route, so a write first runs a small `sh` probe (one command, its exit code
 *   read with `?wait=true`) saying whether the path exists, is a directory, or how many of its parents are
 *   missing; those are made with `POST …/fs/mkdir {path}` when `createParents` is set, and refused otherwise.
 * - no list and no delete: Vercel has no such routes (reference §3.1).
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect, Stream } from "effect"
import type { ProviderError, ProviderSandbox, SandboxProvider } from "../../../src/providers/Provider.ts"
import { unsupported } from "../../../src/providers/Provider.ts"
import { tarGzOneFile, tarNameFits } from "../tar.ts"
import { NAME, type VercelContext, WireCommandResponse } from "./wire.ts"
import { checkWrite } from "../../../src/providers/errors.ts"

/**
 * Exit codes: 4 the path is a directory, 5 it is a file (or anything else), 0 it is absent with its parent there,
 * 10 + n it is absent and its n nearest ancestors are missing.
 */
export const PROBE_SCRIPT = [
  "t=$1",
  "[ -d \"$t\" ] && exit 4",
  "[ -e \"$t\" ] || [ -L \"$t\" ] && exit 5",
  "d=${t%/*}; n=0",
  "while [ -n \"$d\" ] && [ ! -d \"$d\" ]; do n=$((n+1)); d=${d%/*}; done",
  "[ \"$n\" -gt 0 ] && exit $((10+n))",
  "exit 0"
].join("\n")

/** The largest file a read will go through to find a range (beyond it the size must come in Content-Length). */
const MAX_SCAN_BYTES = 1024 * 1024 * 1024

export const makeFiles = (ctx: VercelContext, sessionOf: (sandbox: ProviderSandbox) => Effect.Effect<string, ProviderError>) => {
  const { api, decode, fail, send, sessionPath } = ctx
  const files = ctx.capabilities.files
  const absolute = (p: string) => (p.startsWith("/") ? Effect.succeed(p) : Effect.fail(fail("invalid_request", `${p} is not an absolute path`)))

  const readFile: SandboxProvider["readFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      if (files === null || !files.read) return yield* unsupported(NAME, "reading files")
      const path = yield* absolute(input.path)
      const sessionId = yield* sessionOf(sandbox)
      const response = yield* send(api("POST", `${sessionPath(sessionId)}/fs/read`).pipe(HttpClientRequest.bodyUnsafeJson({ path })), "read file", { mutating: false }).pipe(
        Effect.mapError((e) => (e.kind === "not_found" ? fail("not_found", `${path} does not exist`, 404) : e))
      )
      if ((response.headers["content-type"] ?? "").includes("application/json")) return yield* fail("invalid_request", `vercel read of ${path} answered JSON, not its bytes`)
      const length = Math.min(input.maxBytes, files.maxReadBytes)
      const start = input.offsetBytes
      const end = start + length
      const declared = Number(response.headers["content-length"] ?? Number.NaN)
      const known = Number.isSafeInteger(declared) && declared >= 0
      const kept: Array<Uint8Array> = []
      let position = 0
      // Keep [start, end); stop once it is all there and the size is known, or past the scan limit.
      yield* response.stream.pipe(
        Stream.map((chunk) => {
          const from = Math.max(start - position, 0)
          const to = Math.min(end - position, chunk.length)
          if (to > from) kept.push(chunk.subarray(from, to))
          position += chunk.length
        }),
        Stream.takeUntil(() => (known && position >= end) || position > MAX_SCAN_BYTES),
        Stream.runDrain,
        Effect.mapError((e) => fail("unavailable", `vercel read of ${path} could not be read: ${e.message}`))
      )
      if (!known && position > MAX_SCAN_BYTES) return yield* fail("invalid_request", `${path} is larger than ${MAX_SCAN_BYTES} bytes`)
      const data = new Uint8Array(kept.reduce((n, c) => n + c.length, 0))
      kept.reduce((at, c) => (data.set(c, at), at + c.length), 0)
      const size = known ? declared : position
      return { data, offsetBytes: start, sizeBytes: size, eof: start + data.length >= size }
    })

  /** Runs the probe for `path` and answers its exit code. */
  const probe = (sessionId: string, path: string) =>
    Effect.gen(function*() {
      const body = { command: "sh", args: ["-c", PROBE_SCRIPT, "sh", path], env: {}, sudo: false, timeout: 60_000 }
      const { command } = yield* send(api("POST", `${sessionPath(sessionId)}/cmd`).pipe(HttpClientRequest.bodyUnsafeJson(body)), "probe path").pipe(
        Effect.flatMap(decode(WireCommandResponse, "probe path"))
      )
      const done = yield* send(
        api("GET", `${sessionPath(sessionId)}/cmd/${encodeURIComponent(command.id)}`).pipe(HttpClientRequest.setUrlParam("wait", "true")),
        "wait for probe"
      ).pipe(Effect.flatMap(decode(WireCommandResponse, "wait for probe")))
      return done.command.exitCode ?? -1
    })

  const writeFile: SandboxProvider["writeFile"] = (sandbox, input) =>
    Effect.gen(function*() {
      yield* checkWrite(NAME, files, input)
      const path = yield* absolute(input.path)
      const name = path.replace(/^\/+/, "")
      if (name === "" || path.endsWith("/")) return yield* fail("invalid_request", `${path} names no file`)
      if (!tarNameFits(name)) return yield* fail("invalid_request", `${path} is too long for Vercel's file writes`)
      const sessionId = yield* sessionOf(sandbox)
      const code = yield* probe(sessionId, path)
      if (code === 4) return yield* fail("invalid_request", `${path} is a directory`)
      const exists = code === 5
      if (code !== 0 && !exists && code <= 10) return yield* fail("unavailable", `vercel could not look at ${path} (probe exit ${code})`)
      if (input.mode === "create" && exists) return yield* fail("customer", `${path} already exists`)
      const missing = code > 10 ? code - 10 : 0
      if (missing > 0) {
        const parents: Array<string> = []
        for (let dir = path.slice(0, path.lastIndexOf("/")), i = 0; i < missing && dir !== ""; i++, dir = dir.slice(0, dir.lastIndexOf("/"))) parents.unshift(dir)
        if (!input.createParents) return yield* fail("not_found", `${parents[0] ?? path} does not exist`)
        for (const dir of parents) {
          yield* send(api("POST", `${sessionPath(sessionId)}/fs/mkdir`).pipe(HttpClientRequest.bodyUnsafeJson({ path: dir })), "make directory")
        }
      }
      const request = api("POST", `${sessionPath(sessionId)}/fs/write`).pipe(
        HttpClientRequest.setHeaders({ "x-cwd": "/" }),
        HttpClientRequest.bodyUint8Array(tarGzOneFile(name, input.data), "application/gzip")
      )
      yield* send(request, "write file")
      return { bytesWritten: input.data.length, created: !exists }
    })

  const listFiles: SandboxProvider["listFiles"] = () => Effect.fail(unsupported(NAME, "listing files"))
  const deleteFile: SandboxProvider["deleteFile"] = () => Effect.fail(unsupported(NAME, "deleting files"))

  return { readFile, writeFile, listFiles, deleteFile }
}
