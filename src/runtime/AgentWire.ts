/**
 * Shapes of the agent's answers, checked before use (the agent is hostile: AgentChannel.ts). Every check fails
 * with the same RuntimeError in the user's terms; nothing of the answer itself reaches an error message except
 * the agent's own error message for a failed operation, which is cut to a sane length and stripped of control
 * characters (it is the sandbox's to say, and only its own user reads it).
 */
import { type AgentAnswer, INVALID } from "./AgentChannel.ts"
import type { ExecEvent, ExecInfo, FileEntry } from "./LocalRuntime.ts"
import { RuntimeError } from "./LocalRuntime.ts"

/** Caps on answers, from the agent's own budgets (agent.ts) plus slack. */
export const MAX_JSON_ANSWER = 1024 * 1024
/** Events: MAX_BYTES_PER_ANSWER (8 MiB) of output as base64, plus JSON per event (at most 1000). */
export const MAX_EVENTS_ANSWER = Math.ceil((8 * 1024 * 1024 * 4) / 3) + 1000 * 256 + 64 * 1024
export const MAX_READ_SLACK = 64 * 1024
/** A listing: per entry a path of at most 4096 bytes plus its fields, and no more than 64 MiB in all. */
export const maxListAnswer = (maxEntries: number) => Math.min(64 * 1024 * 1024, 64 * 1024 + maxEntries * 4400)
const MAX_MESSAGE = 500

/** The error for a malformed answer (kind `unavailable`: the sandbox's agent misbehaves). */
export const invalidAnswer = () => new RuntimeError({ kind: "unavailable", message: INVALID })

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)
const isInt = (v: unknown, min = 0, max = Number.MAX_SAFE_INTEGER): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= min && v <= max
const isShortString = (v: unknown, max = 4096): v is string => typeof v === "string" && v.length <= max
const isIsoDate = (v: unknown): v is string => typeof v === "string" && v.length <= 40 && !Number.isNaN(Date.parse(v))
const KINDS = new Set<RuntimeError["kind"]>(["not_found", "conflict", "invalid", "unavailable", "internal"])

export const parseJson = (answer: AgentAnswer): unknown => {
  try {
    return JSON.parse(answer.body.toString("utf8"))
  } catch {
    throw invalidAnswer()
  }
}

/** A message from the agent, made fit to show: printable, bounded. */
export const cleanMessage = (message: string) => {
  // eslint-disable-next-line no-control-regex
  const printable = message.replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ").trim()
  return printable.length > MAX_MESSAGE ? `${printable.slice(0, MAX_MESSAGE)}…` : printable
}

/** The RuntimeError a non-2xx answer stands for. */
export const answerError = (answer: AgentAnswer): RuntimeError => {
  let body: unknown
  try {
    body = JSON.parse(answer.body.toString("utf8"))
  } catch {
    return invalidAnswer()
  }
  if (!isObject(body) || typeof body["kind"] !== "string" || !KINDS.has(body["kind"] as RuntimeError["kind"]) || typeof body["message"] !== "string") return invalidAnswer()
  const message = cleanMessage(body["message"])
  return new RuntimeError({ kind: body["kind"] as RuntimeError["kind"], message: message === "" ? "the sandbox agent refused the request" : message })
}

/** The JSON of a 2xx answer (or the error it stands for). */
export const okJson = (answer: AgentAnswer): unknown => {
  if (answer.status < 200 || answer.status > 299) throw answerError(answer)
  return parseJson(answer)
}

const check = <A>(ok: boolean, value: A): A => {
  if (!ok) throw invalidAnswer()
  return value
}

export const execInfo = (v: unknown): ExecInfo => {
  if (!isObject(v)) throw invalidAnswer()
  const { execId, tag, pid, state, startedAt, exitCode } = v
  return check(
    isShortString(execId, 200) && execId.length > 0 && (tag === null || isShortString(tag, 200)) && isInt(pid, 0, 2 ** 31) &&
      (state === "running" || state === "exited") && isIsoDate(startedAt) && (exitCode === null || isInt(exitCode, -(2 ** 31), 2 ** 31)),
    { execId: execId as string, tag: tag as string | null, pid: pid as number, state: state as ExecInfo["state"], startedAt: startedAt as string, exitCode: exitCode as number | null }
  )
}

/** Events from `fromSeq`: contiguous, and nothing after an exit. */
export const execEvents = (v: unknown, fromSeq: number): Array<ExecEvent> => {
  if (!isObject(v) || !Array.isArray(v["events"])) throw invalidAnswer()
  const events: Array<ExecEvent> = []
  for (const [index, e] of (v["events"] as Array<unknown>).entries()) {
    if (!isObject(e) || e["seq"] !== fromSeq + index || events.at(-1)?.type === "exit") throw invalidAnswer()
    const seq = fromSeq + index
    if (e["type"] === "stdout" || e["type"] === "stderr") {
      if (typeof e["data"] !== "string") throw invalidAnswer()
      events.push({ seq, type: e["type"], data: Buffer.from(e["data"], "base64") })
    } else if (e["type"] === "exit") {
      const { exitCode, signal, cancelled, timedOut, outputTruncated } = e
      if (
        !(exitCode === null || isInt(exitCode, -(2 ** 31), 2 ** 31)) || !(signal === null || isShortString(signal, 32)) || typeof cancelled !== "boolean" ||
        typeof timedOut !== "boolean" || typeof outputTruncated !== "boolean"
      ) throw invalidAnswer()
      events.push({ seq, type: "exit", exitCode: exitCode as number | null, signal: signal as string | null, cancelled, timedOut, outputTruncated })
    } else throw invalidAnswer()
  }
  return events
}

export const writeResult = (v: unknown, length: number) => {
  if (!isObject(v)) throw invalidAnswer()
  const { bytesWritten, created } = v
  return check(isInt(bytesWritten, 0, length) && typeof created === "boolean", { bytesWritten: bytesWritten as number, created: created as boolean })
}

const TYPES = new Set(["file", "directory", "symlink", "other"])

export const fileEntry = (v: unknown): FileEntry => {
  if (!isObject(v)) throw invalidAnswer()
  const { path, type, sizeBytes, modifiedAt, mode } = v
  return check(
    isShortString(path, 8192) && path.startsWith("/") && typeof type === "string" && TYPES.has(type) && isInt(sizeBytes) && isIsoDate(modifiedAt) && isInt(mode, 0, 0o7777),
    { path: path as string, type: type as FileEntry["type"], sizeBytes: sizeBytes as number, modifiedAt: modifiedAt as string, mode: mode as number }
  )
}

export const statResult = (v: unknown): FileEntry | null => {
  if (!isObject(v) || !("entry" in v)) throw invalidAnswer()
  return v["entry"] === null ? null : fileEntry(v["entry"])
}

export const listResult = (v: unknown, maxEntries: number) => {
  if (!isObject(v) || !Array.isArray(v["entries"]) || typeof v["truncated"] !== "boolean" || v["entries"].length > maxEntries) throw invalidAnswer()
  return { entries: (v["entries"] as Array<unknown>).map(fileEntry), truncated: v["truncated"] }
}

export const deleteResult = (v: unknown) => {
  if (!isObject(v) || typeof v["deleted"] !== "boolean") throw invalidAnswer()
  return v["deleted"]
}

/** An answer that carries nothing the caller needs: any JSON object. */
export const acknowledged = (v: unknown) => {
  if (!isObject(v)) throw invalidAnswer()
}

/** The file's size a read's answer states in its head. */
export const readSize = (headers: Headers) => {
  const size = Number(headers.get("x-size") ?? NaN)
  if (!isInt(size)) throw invalidAnswer()
  return size
}

/** A file read's answer: the bytes (at most `limit`), the file's size and whether the read reached its end. */
export const readResult = (answer: AgentAnswer, limit: number) => {
  if (answer.status < 200 || answer.status > 299) throw answerError(answer)
  const size = Number(answer.headers.get("x-size") ?? NaN)
  const eof = answer.headers.get("x-eof")
  if (!isInt(size) || (eof !== "true" && eof !== "false") || answer.body.length > limit) throw invalidAnswer()
  return { data: new Uint8Array(answer.body.buffer, answer.body.byteOffset, answer.body.length), size, eof: eof === "true" }
}
