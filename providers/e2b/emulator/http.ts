/**
 * What the E2B emulator's planes answer with: the control API's JSON errors `{code, message}`, Connect errors,
 * failures thrown by handlers, and the shapes shared by envd's calls (entries, end events, paths).
 */
import * as path from "node:path"
import type { ExecEvent, FileEntry, RuntimeError } from "../../../src/runtime/LocalRuntime.ts"
import { GO_SIGNAL_NAMES } from "../adapter/wire.ts"
import { CONNECT_STATUS, type ConnectCode } from "../connect.ts"

export const ENVD_VERSION = "0.5.7"
const HOME = "/workspace"
export const MAX_TIMEOUT_SECONDS = 86_400

export class HttpFailure extends Error {
  constructor(readonly status: number, message: string) {
    super(message)
  }
}
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

/** A body's `timeout` in seconds (E2B caps it at a day). */
export const timeoutField = (body: Record<string, unknown>, required: boolean, fallback: number) => {
  const t = body["timeout"]
  if (t === undefined && !required) return fallback
  if (!isNonNegativeInt(t)) throw new HttpFailure(400, "timeout must be a non-negative integer (seconds)")
  if (t > MAX_TIMEOUT_SECONDS) throw new HttpFailure(400, `timeout cannot be greater than ${MAX_TIMEOUT_SECONDS / 3600} hours`)
  return t
}
