/**
 * What the E2B emulator's planes answer with: the control API's JSON errors `{code, message}`, Connect errors,
 * failures thrown by handlers, and the shapes shared by envd's calls (entries, end events, paths).
 */
import * as path from "node:path"
import type { ExecEvent, FileEntry, RuntimeError } from "../../../src/runtime/LocalRuntime.ts"
import { DEFAULT_USER, GO_SIGNAL_NAMES } from "../adapter/wire.ts"
import { CONNECT_STATUS, type ConnectCode } from "../connect.ts"
import { failureAnswer, HttpFailure } from "../../core/emulator/failure.ts"

export const ENVD_VERSION = "0.5.7"
const HOME = "/workspace"
export const MAX_TIMEOUT_SECONDS = 86_400

/** Handlers throw the kit's failure; `answerFailure` writes it, or a runtime failure, as the control API's error. */
export { HttpFailure }
export class ConnectFailure extends Error {
  constructor(readonly code: ConnectCode, message: string) {
    super(message)
  }
}

export const json = (body: unknown, status = 200, headers: Record<string, string> = {}) => Response.json(body, { status, headers })
export const apiError = (status: number, message: string) => json({ code: status, message }, status)
export const connectError = (code: ConnectCode, message: string) => json({ code, message }, CONNECT_STATUS[code])

export const isStringRecord = (v: unknown): v is Record<string, string> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === "string")
export const isNonNegativeInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0

/** Runtime failures in envd terms. */
export const connectCodeOf = (e: unknown): ConnectCode => {
  const kind = (e as Partial<RuntimeError>).kind
  return kind === "not_found" ? "not_found" : kind === "invalid" ? "invalid_argument" : kind === "conflict" ? "failed_precondition" : kind === "unavailable" ? "unavailable" : "internal"
}
export const statusOf = (e: unknown) => CONNECT_STATUS[connectCodeOf(e)]
export const answerFailure = failureAnswer("e2b", (f) => apiError(f.status, f.message), { statusOf })

const permissions = (entry: FileEntry) => {
  const bits = "rwxrwxrwx".split("").map((c, i) => ((entry.mode >> (8 - i)) & 1 ? c : "-")).join("")
  return `${entry.type === "directory" ? "d" : entry.type === "symlink" ? "L" : "-"}${bits}`
}
export const entryInfo = (e: FileEntry) => ({
  name: path.posix.basename(e.path),
  type: e.type === "directory" ? "FILE_TYPE_DIRECTORY" : e.type === "symlink" ? "FILE_TYPE_SYMLINK" : e.type === "file" ? "FILE_TYPE_FILE" : "FILE_TYPE_UNSPECIFIED",
  path: e.path,
  size: String(e.sizeBytes),
  mode: e.mode,
  permissions: permissions(e),
  owner: "user",
  group: "user",
  modifiedTime: e.modifiedAt
})

/**
 * The user an envd call names — `Authorization: Basic <user>:` on RPCs, `?username=` on `/files` — checked: null
 * when the call may run, else why not. Without a name envd uses its default user, `user`. Every process of this
 * emulator's sandboxes runs as the jail's one user, uid 1000, named `user` in its /etc/passwd: that name is
 * honoured; `root` cannot be (a local sandbox has no root), so it is refused rather than run as `user`; any other
 * name is envd's own "invalid username".
 */
export const userProblem = (name: string | null): { readonly code: ConnectCode; readonly status: number; readonly message: string } | null => {
  if (name === null || name === DEFAULT_USER) return null
  if (name === "root") {
    return { code: "permission_denied", status: 403, message: `this emulator runs every command and file call as the default user "${DEFAULT_USER}" (uid 1000): a local sandbox has no root` }
  }
  return { code: "unauthenticated", status: 401, message: `invalid username: '${name}'` }
}

/** The user a Connect call names in its Basic authorization (the password is empty), or null. */
export const rpcUser = (request: Request): string | null => {
  const header = request.headers.get("authorization")
  const basic = header === null ? null : /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header.trim())
  // A header that is not Basic names no user (envd then uses its default, as for none).
  if (basic === null || basic === undefined) return null
  const decoded = Buffer.from(basic[1]!, "base64").toString("utf8")
  return decoded.includes(":") ? decoded.slice(0, decoded.indexOf(":")) : decoded
}

/** envd resolves relative paths against the user's home. */
export const resolvePath = (p: string) => (p.startsWith("/") ? path.posix.normalize(p) : path.posix.join(HOME, p))

/** The end event as envd's Go side writes it (protobuf JSON leaves out defaults). */
export const endEvent = (exit: Extract<ExecEvent, { type: "exit" }>) => {
  if (exit.exitCode !== null) {
    const status = `exit status ${exit.exitCode}`
    return exit.exitCode === 0 ? { exited: true, status } : { exitCode: exit.exitCode, exited: true, status, error: status }
  }
  const status = `signal: ${GO_SIGNAL_NAMES[exit.signal ?? ""] ?? (exit.signal ?? "unknown").toLowerCase()}`
  return { exitCode: -1, status, error: status }
}


export const readJson = async (request: Request): Promise<Record<string, unknown>> => {
  let body: unknown
  try {
    body = await request.json()
  } catch {
    throw new HttpFailure(400, "the request body is not valid JSON")
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new HttpFailure(400, "the request body must be a JSON object")
  return body as Record<string, unknown>
}

/** A JSON object body that E2B makes optional: an empty body reads as `{}`. */
export const readOptionalJson = async (request: Request): Promise<Record<string, unknown>> => {
  const text = await request.text()
  return text.trim() === "" ? {} : readJson(new Request("http://body/", { method: "POST", body: text }))
}

/** A body's `timeout` in seconds (E2B caps it at a day). */
export const timeoutField = (body: Record<string, unknown>, required: boolean, fallback: number) => {
  const t = body["timeout"]
  if (t === undefined && !required) return fallback
  if (!isNonNegativeInt(t)) throw new HttpFailure(400, "timeout must be a non-negative integer (seconds)")
  if (t > MAX_TIMEOUT_SECONDS) throw new HttpFailure(400, `timeout cannot be greater than ${MAX_TIMEOUT_SECONDS / 3600} hours`)
  return t
}
