/**
 * What the Daytona emulator answers with: the control API's error body, the daemon's (toolbox) error body, its
 * sandbox shape, Go's file modes, and the shell the daemon picks.
 */
import type { Schema } from "effect"
import { decodeJsonBody } from "../../core/emulator/server.ts"
import { failureAnswer, HttpFailure } from "../../core/emulator/failure.ts"
import type { EmulatedSandbox } from "./books.ts"

export const json = (body: unknown, status = 200) => Response.json(body, { status })
/** The control API's error body (NestJS). */
export const error = (status: number, message: string) => json({ statusCode: status, message, error: message }, status)
export const answerFailure = failureAnswer("daytona", (f) => error(f.status, f.message))

/** The daemon's error codes by status, for errors without a more specific one (toolbox-api-client's DaemonErrorCode). */
const DAEMON_CODES: Readonly<Record<number, string>> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  408: "REQUEST_TIMEOUT",
  409: "CONFLICT",
  410: "GONE",
  422: "UNPROCESSABLE_ENTITY",
  500: "INTERNAL_SERVER_ERROR"
}

/**
 * The daemon's error body (its ErrorResponse: status, message, a code of DaemonErrorCode, `source`, when and where),
 * which the SDK turns into its error classes (`DAYTONA_DAEMON|FILE_NOT_FOUND` is a DaytonaFileNotFoundError).
 */
export const daemonError = (request: Request, status: number, message: string, code?: string) =>
  json({
    statusCode: status,
    message,
    code: code ?? DAEMON_CODES[status] ?? "INTERNAL_SERVER_ERROR",
    source: "DAYTONA_DAEMON",
    timestamp: new Date().toISOString(),
    path: new URL(request.url).pathname,
    method: request.method
  }, status)

/** Handlers throw the kit's failure: answered with its status in Daytona's error body (the daemon's, with `code`, on the toolbox). */
export { HttpFailure }

/** The largest JSON body a toolbox route reads (a command, input to it, a list of paths): a request is never held beyond it. */
export const MAX_JSON_BODY_BYTES = 4 * 1024 * 1024

/** A request's body as text, refused (413) past `cap` bytes: by its Content-Length, else counted as it comes. */
export const readTextAtMost = async (request: Request, cap: number): Promise<string> => {
  const tooLarge = () => new HttpFailure(413, `the request body is larger than ${cap} bytes`)
  const declared = Number(request.headers.get("content-length") ?? "")
  if (Number.isFinite(declared) && declared > cap) throw tooLarge()
  if (request.body === null) return ""
  const chunks: Array<Uint8Array> = []
  let size = 0
  for await (const chunk of request.body) {
    size += chunk.length
    if (size > cap) throw tooLarge()
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString("utf8")
}

/**
 * A toolbox request's JSON body decoded by `schema` (unknown fields ignored, as the daemon's Go decoding ignores
 * them), read at most MAX_JSON_BODY_BYTES; a body that is not JSON or not of the shape is a 400.
 */
export const decodeBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>): Promise<A> => {
  const text = await readTextAtMost(request, MAX_JSON_BODY_BYTES)
  const decoded = await decodeJsonBody(new Request("http://body.invalid/", { method: "POST", body: text }), schema)
  if (!decoded.ok) throw new HttpFailure(400, decoded.problem === "json" ? "invalid request body: the body is not valid JSON" : decoded.message)
  return decoded.value
}

/**
 * The shell the daemon picks (common.GetShell): the first of zsh and bash listed in /etc/shells, else $SHELL, else
 * sh — run with `args` (a session's shell reads its commands from stdin: none; a PTY's: ` -i -l`). The list is
 * read with the shell's own builtins (a grep per candidate was up to four processes per session).
 */
export const userShell = (args = ""): Array<string> => [
  "sh",
  "-c",
  `if [ -r /etc/shells ]; then for s in /usr/bin/zsh /bin/zsh /usr/bin/bash /bin/bash; do while IFS= read -r l; do [ "$l" = "$s" ] && exec "$s"${args}; done </etc/shells; done; fi; exec "\${SHELL:-sh}"${args}`
]

/** A mode as the daemon sends it: Go's `os.FileMode.String()`, e.g. `-rw-r--r--`, `drwxr-xr-x`, `Lrwxrwxrwx`. */
export const goFileMode = (entry: { readonly type: "file" | "directory" | "symlink" | "other"; readonly mode: number }) => {
  const kind = entry.type === "file" ? "-" : entry.type === "directory" ? "d" : entry.type === "symlink" ? "L" : "?"
  const bits = "rwxrwxrwx".split("").map((c, i) => ((entry.mode >> (8 - i)) & 1 ? c : "-")).join("")
  return kind + bits
}

/**
 * A sandbox as the control API answers it (its Sandbox DTO): one created from an image says so in `buildInfo` (its
 * declarative build), as Daytona's does; the user is the jail's (`user`, home /workspace).
 */
export const toWire = (s: EmulatedSandbox, baseUrl: string) => ({
  id: s.id,
  name: s.name,
  organizationId: "emulated",
  user: "user",
  labels: s.labels,
  state: s.state,
  ...(s.errorReason !== undefined ? { errorReason: s.errorReason } : {}),
  cpu: s.cpu,
  gpu: 0,
  memory: s.memory,
  disk: s.disk,
  env: s.env,
  public: false,
  target: "local",
  autoStopInterval: 0,
  autoArchiveInterval: 0,
  autoDeleteInterval: -1,
  ...(s.image !== undefined ? { buildInfo: { dockerfileContent: `FROM ${s.image}\n`, createdAt: s.createdAt, updatedAt: s.createdAt, snapshotRef: s.image } } : {}),
  createdAt: s.createdAt,
  updatedAt: s.createdAt,
  toolboxProxyUrl: `${baseUrl}/toolbox`
})
