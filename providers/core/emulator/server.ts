/**
 * Serving an emulator: a port that stays the same across restarts (stored sandboxes carry the provider's URLs),
 * a small router from method and path pattern to handler, runtime calls that throw the runtime's typed error,
 * and the status for such an error.
 */
import { Cause, Effect, Either, Exit, Option, ParseResult, Schema, type Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { AppConfig } from "../../../src/Config.ts"
import { LocalRuntime, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { imagePullMessage } from "../../../src/providers/errors.ts"

/**
 * Runs an Effect; its typed failure (a RuntimeError with its `kind`) is what gets thrown. `signal` (a request's:
 * its client hung up) interrupts it.
 */
export const runOrThrow = async <A, E>(effect: Effect.Effect<A, E>, signal?: AbortSignal): Promise<A> => {
  const exit = await Effect.runPromiseExit(effect, signal === undefined ? {} : { signal })
  if (Exit.isSuccess(exit)) return exit.value
  const failure = Cause.failureOption(exit.cause)
  throw Option.isSome(failure) ? failure.value : Cause.squash(exit.cause)
}

/**
 * The message an emulator answers for something thrown in a handler: a runtime failure's own message (it says what
 * failed in the sandbox), never the text of anything else — a crash's message is JavaScript (`undefined is not an
 * object (evaluating …)`), which no provider would send. That goes to stderr for the operator.
 */
export const emulatorMessage = (e: unknown, emulator: string): string => {
  if (typeof e === "object" && e !== null && (e as { _tag?: unknown })._tag === "RuntimeError") {
    const message = String((e as { message?: unknown }).message)
    return (e as { kind?: unknown }).kind === "image_pull_failed" ? imagePullMessage(message) : message
  }
  console.error(`${emulator} emulator: unexpected failure`, e)
  return "internal error"
}

/**
 * Options every emulator's Bun server is started with: production mode always (Bun's development mode answers an
 * exception with an error page naming host paths and quoting the source), and for anything a handler still throws
 * a 500 without internals (the error goes to stderr).
 */
export const emulatorServeOptions = (emulator: string) => ({
  development: false,
  error: (error: unknown) => Response.json({ message: emulatorMessage(error, emulator) }, { status: 500 })
}) as const

/** The HTTP status for a runtime failure thrown inside an emulator handler. */
export const statusOfRuntimeError = (e: unknown): number => {
  const kind = (e as { kind?: string }).kind
  return kind === "not_found" ? 404 : kind === "conflict" ? 409 : kind === "invalid" || kind === "image_pull_failed" ? 400 : 500
}

/** Serves on the port used last time for this emulator (or a new one if it is taken) and remembers it. */
export const servePersistent = <T extends { readonly port: number | undefined }>(dir: string, serve: (port: number) => T): T => {
  const file = path.join(dir, "port")
  const saved = fs.existsSync(file) ? Number(fs.readFileSync(file, "utf8")) : 0
  let server: T
  try {
    server = serve(saved)
  } catch {
    server = serve(0)
  }
  fs.writeFileSync(file, String(server.port))
  return server
}

export type Params = Readonly<Record<string, string>>

export interface Route<C> {
  readonly method: string
  /** Segments separated by `/`: literals, `:name` for one segment, a final `*name` for the rest (maybe empty). */
  readonly pattern: string
  readonly handle: (context: C, params: Params) => Promise<Response> | Response
}

export const route = <C>(method: string, pattern: string, handle: Route<C>["handle"]): Route<C> => ({ method, pattern, handle })

/**
 * A router over a table of routes, in order. `match` answers the handler and its parameters (segments are
 * URL-decoded; a malformed escape matches nothing), or whether the path exists under another method.
 */
export const makeRouter = <C>(routes: ReadonlyArray<Route<C>>) => {
  const compiled = routes.map((r) => ({ ...r, segments: r.pattern.split("/").filter((s) => s !== "") }))
  const matchPattern = (segments: ReadonlyArray<string>, parts: ReadonlyArray<string>): Record<string, string> | undefined => {
    const params: Record<string, string> = {}
    for (let i = 0; i < segments.length; i++) {
      const segment = segments[i]!
      if (segment.startsWith("*")) {
        params[segment.slice(1)] = parts.slice(i).join("/")
        return params
      }
      const part = parts[i]
      if (part === undefined) return undefined
      if (segment.startsWith(":")) params[segment.slice(1)] = part
      else if (segment !== part) return undefined
    }
    return parts.length === segments.length ? params : undefined
  }
  return {
    match: (method: string, pathname: string):
      | { readonly _tag: "Found"; readonly handle: (context: C) => Promise<Response> | Response }
      | { readonly _tag: "NotFound" | "MethodNotAllowed" } => {
      let parts: Array<string>
      try {
        parts = pathname.split("/").filter((s) => s !== "").map(decodeURIComponent)
      } catch {
        return { _tag: "NotFound" }
      }
      let otherMethod = false
      for (const r of compiled) {
        const params = matchPattern(r.segments, parts)
        if (params === undefined) continue
        if (r.method !== method && r.method !== "*") {
          otherMethod = true
          continue
        }
        return { _tag: "Found", handle: (context) => r.handle(context, params) }
      }
      return { _tag: otherMethod ? "MethodNotAllowed" : "NotFound" }
    }
  }
}

/**
 * A request's JSON body decoded by `schema`: the value, or why not — the body is not JSON (`json`), not of the
 * shape (`shape`, a one-line message of at most 300 characters), or it sets a field the emulator cannot honour
 * (`unhonoured`). Keys the schema does not name are accepted and ignored, as the providers' APIs accept them (their
 * SDKs send fields newer than any emulator); a field of the provider's API that would change what the emulator
 * does, but that it cannot do, goes in `unhonoured` (field → what to say), so it is refused rather than ignored.
 * Such a field is refused when present and not null. Each emulator answers these in its provider's own error
 * format and status. `emptyIsObject`: an empty body reads as `{}`.
 */
export const decodeJsonBody = async <A, I>(
  request: Request,
  schema: Schema.Schema<A, I>,
  options: { readonly emptyIsObject?: boolean; readonly unhonoured?: Readonly<Record<string, string>> } = {}
): Promise<{ readonly ok: true; readonly value: A } | { readonly ok: false; readonly problem: "json" | "shape" | "unhonoured"; readonly message: string }> => {
  let body: unknown
  try {
    const text = await request.text()
    body = options.emptyIsObject === true && text.trim() === "" ? {} : JSON.parse(text)
  } catch {
    return { ok: false, problem: "json", message: "the request body is not valid JSON" }
  }
  const refused = unhonouredField(body, options.unhonoured ?? {})
  if (refused !== undefined) return { ok: false, problem: "unhonoured", message: refused }
  const decoded = Schema.decodeUnknownEither(schema, { onExcessProperty: "ignore", errors: "first" })(body)
  if (Either.isRight(decoded)) return { ok: true, value: decoded.right }
  return { ok: false, problem: "shape", message: `invalid request body: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left).replace(/\s+/g, " ").slice(0, 300)}` }
}

/** The message for the first field of `fields` (field → why it cannot be honoured) that `body` sets, if any. */
/**
 * A request body as text and, when it is JSON, as parsed (else undefined): for a create whose raw fields are checked
 * (unhonouredField) before the text is decoded by its schema.
 */
export const bodyTextAndJson = async (request: Request): Promise<{ readonly text: string; readonly raw: unknown }> => {
  const text = await request.text()
  try {
    return { text, raw: JSON.parse(text) }
  } catch {
    return { text, raw: undefined }
  }
}

export const unhonouredField = (body: unknown, fields: Readonly<Record<string, string>>): string | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined
  const set = Object.keys(fields).find((field) => Object.hasOwn(body, field) && (body as Record<string, unknown>)[field] !== null && (body as Record<string, unknown>)[field] !== undefined)
  return set === undefined ? undefined : `${set}: ${fields[set]}`
}

/**
 * An emulator for the running gateway, started on its DATA_DIR and local runtime in the caller's scope and
 * stopped when that closes; `info` is what of it the adapter is pointed at.
 */
export const scopedEmulator = <H extends { readonly stop: () => void }, I>(
  start: (dataDir: string, runtime: LocalRuntimeShape) => H,
  info: (handle: H) => I
): Effect.Effect<I, never, AppConfig | LocalRuntime | Scope.Scope> =>
  Effect.gen(function*() {
    const { dataDir } = yield* AppConfig
    const runtime = yield* LocalRuntime
    return info(yield* Effect.acquireRelease(Effect.sync(() => start(dataDir, runtime)), (h) => Effect.sync(() => h.stop())))
  })
