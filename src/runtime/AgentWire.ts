/**
 * The agent's answers decoded before use, by the Schemas of its protocol (AgentProtocol.ts): the agent is hostile
 * (AgentChannel.ts). Every failure is the same RuntimeError in the user's terms; nothing of the answer itself
 * reaches an error message except the agent's own error message for a failed operation, which is cut to a sane
 * length and stripped of control characters (it is the sandbox's to say, and only its own user reads it). What a
 * Schema cannot know — the request the answer is for — is checked here after decoding.
 */
import { Either, Schema } from "effect"
import { type AgentAnswer, INVALID } from "./AgentChannel.ts"
import * as Protocol from "./AgentProtocol.ts"
import type { ExecEvent, ExecInfo, FileEntry } from "./LocalRuntime.ts"
import { RuntimeError } from "./LocalRuntime.ts"

/** Caps on answers, from the agent's own budgets (agent/events.ts) plus slack. */
export const MAX_JSON_ANSWER = 1024 * 1024
/** Events: MAX_BYTES_PER_ANSWER (8 MiB) of output as base64, plus JSON per event (at most 1000). */
export const MAX_EVENTS_ANSWER = Math.ceil((8 * 1024 * 1024 * 4) / 3) + 1000 * 256 + 64 * 1024
export const MAX_READ_SLACK = 64 * 1024
/** A listing: per entry a path of at most 4096 bytes plus its fields, and no more than 64 MiB in all. */
export const maxListAnswer = (maxEntries: number) => Math.min(64 * 1024 * 1024, 64 * 1024 + maxEntries * 4400)
const MAX_MESSAGE = 500

/** The error for a malformed answer (kind `unavailable`: the sandbox's agent misbehaves). */
export const invalidAnswer = () => new RuntimeError({ kind: "unavailable", message: INVALID })

/** A decoder of a value by `schema` that fails as an invalid answer. */
export const decoder = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "first" })
  return (value: unknown): A => {
    const decoded = decode(value)
    if (Either.isLeft(decoded)) throw invalidAnswer()
    return decoded.right
  }
}

/** A decoder of an answer's JSON body by `schema` (after the answer's status says it succeeded). */
export const jsonDecoder = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = decoder(Schema.parseJson(schema))
  return (answer: AgentAnswer): A => {
    if (answer.status < 200 || answer.status > 299) throw answerError(answer)
    return decode(answer.body.toString("utf8"))
  }
}

/** A message from the agent, made fit to show: printable, bounded. */
export const cleanMessage = (message: string) => {
  // eslint-disable-next-line no-control-regex
  const printable = message.replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ").trim()
  return printable.length > MAX_MESSAGE ? `${printable.slice(0, MAX_MESSAGE)}…` : printable
}

const decodeError = Schema.decodeUnknownEither(Schema.parseJson(Protocol.ErrorAnswer), { errors: "first" })

/** The RuntimeError a non-2xx answer stands for. */
export const answerError = (answer: AgentAnswer): RuntimeError => {
  const decoded = decodeError(answer.body.toString("utf8"))
  if (Either.isLeft(decoded)) return invalidAnswer()
  const message = cleanMessage(decoded.right.message)
  return new RuntimeError({ kind: decoded.right.kind, message: message === "" ? "the sandbox agent refused the request" : message })
}

const execInfoAnswer = jsonDecoder(Protocol.ExecInfoAnswer)
export const execInfo = (answer: AgentAnswer): ExecInfo => execInfoAnswer(answer)

const eventsAnswer = jsonDecoder(Protocol.ExecEventsAnswer)

/** Events from `fromSeq`: contiguous, and nothing after an exit. */
export const execEvents = (answer: AgentAnswer, fromSeq: number): Array<ExecEvent> => {
  const events: Array<ExecEvent> = []
  for (const [index, e] of eventsAnswer(answer).events.entries()) {
    if (e.seq !== fromSeq + index || events.at(-1)?.type === "exit") throw invalidAnswer()
    events.push(e.type === "exit" ? e : { seq: e.seq, type: e.type, data: Buffer.from(e.data, "base64") })
  }
  return events
}

const writeAnswer = jsonDecoder(Protocol.WriteAnswer)
/** A write's answer: never more bytes written than were sent. */
export const writeResult = (answer: AgentAnswer, length: number) => {
  const result = writeAnswer(answer)
  if (result.bytesWritten > length) throw invalidAnswer()
  return result
}

const statAnswer = jsonDecoder(Protocol.StatAnswer)
export const statResult = (answer: AgentAnswer): FileEntry | null => statAnswer(answer).entry

const listAnswer = jsonDecoder(Protocol.ListAnswer)
/** A listing's answer: never more entries than were asked for. */
export const listResult = (answer: AgentAnswer, maxEntries: number) => {
  const list = listAnswer(answer)
  if (list.entries.length > maxEntries) throw invalidAnswer()
  return list
}

const deleteAnswer = jsonDecoder(Protocol.DeleteAnswer)
export const deleteResult = (answer: AgentAnswer) => deleteAnswer(answer).deleted

/** An answer that carries nothing the caller needs. */
export const acknowledged: (answer: AgentAnswer) => unknown = jsonDecoder(Protocol.Acknowledged)
/** The agent answers its health (and so its socket is known to answer). */
export const healthy: (answer: AgentAnswer) => unknown = jsonDecoder(Protocol.HealthAnswer)

const readHead = decoder(Protocol.ReadHead)
const headOf = (headers: Headers) => readHead({ "x-size": headers.get("x-size"), "x-eof": headers.get("x-eof") })

/** The file's size a read's answer states in its head. */
export const readSize = (headers: Headers) => headOf(headers)["x-size"]

/** A file read's answer: the bytes (at most `limit`), the file's size and whether the read reached its end. */
export const readResult = (answer: AgentAnswer, limit: number) => {
  if (answer.status < 200 || answer.status > 299) throw answerError(answer)
  const head = headOf(answer.headers)
  if (answer.body.length > limit) throw invalidAnswer()
  return { data: new Uint8Array(answer.body.buffer, answer.body.byteOffset, answer.body.length), size: head["x-size"], eof: head["x-eof"] === "true" }
}
