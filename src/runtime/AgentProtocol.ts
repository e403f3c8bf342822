/**
 * The in-jail agent's protocol (agent/main.ts), declared once: every request body, answer, answer head and event
 * frame between the gateway and a jail's agent. The gateway decodes every answer with these Schemas
 * (AgentWire.ts, DesktopWire.ts); the agent builds its answers as their encoded types.
 *
 * Why the agent imports only types from here: the agent is self-contained (node builtins only) because it runs
 * inside the jail from the tools tmpfs, where there is no node_modules and so no Effect. Its `import type` of this
 * module is erased when it is transpiled, so the Schemas stay the one definition and the compiler holds the agent
 * to them (`bun run check`), while the jail gets none of Effect.
 *
 * The bounds are what the agent can honestly say (agent/events.ts budgets, agent/desktop.ts screen sizes, the
 * kernel's pids and modes); an answer outside them is a misbehaving agent, and its call fails as an invalid answer.
 */
import { Schema } from "effect"

const int = (min: number, max: number) => Schema.Number.pipe(Schema.int(), Schema.between(min, max))
const Count = int(0, Number.MAX_SAFE_INTEGER)
const Int32 = int(-(2 ** 31), 2 ** 31)
const Coordinate = int(-32768, 32767)
const Port = int(1, 65535)
const text = (max: number) => Schema.String.pipe(Schema.maxLength(max))
/** A timestamp as the agent writes it (`toISOString`). */
const Timestamp = Schema.String.pipe(Schema.maxLength(40), Schema.filter((s) => !Number.isNaN(Date.parse(s)), { message: () => "not a date" }))
/** A whole number carried as a header's text. */
const headerInt = (min: number, max: number) => Schema.NumberFromString.pipe(Schema.int(), Schema.between(min, max))

/** The largest screen a desktop has (agent/desktop.ts MAX_WIDTH × MAX_HEIGHT). */
export const MAX_SCREEN = { width: 3840, height: 2160 } as const
/** Recording ids the agent makes: 32 lowercase hex digits. */
export const RECORDING_ID = /^[a-f0-9]{32}$/

// Requests ----------------------------------------------------------------------------------------------------
// A route's query is declared by the Schema of its parameters: encoded, each is the text the agent reads (a flag
// "0" or "1", a number its digits). The agent checks each value's range itself and answers `invalid` for one
// outside it, so the numbers here are any numbers: encoding what the gateway built never fails.

const Num = Schema.NumberFromString
const Flag = Schema.transform(Schema.Literal("0", "1"), Schema.Boolean, { strict: true, decode: (s) => s === "1", encode: (b) => (b ? "1" : "0") })
/** An absolute path inside the jail. */
const JailPath = Schema.String

/** `GET /exec/<id>/events`: events from `from` on, waiting up to `wait` ms for the first. */
export const EventsQuery = Schema.Struct({ from: Num, wait: Num })
export type EventsQuery = typeof EventsQuery.Encoded
/** `POST /exec/<id>/kill`. */
export const KillQuery = Schema.Struct({ signal: Schema.String })
export type KillQuery = typeof KillQuery.Encoded
/** `POST /exec/<id>/stdin` (the body is the bytes): `close` ends the input after them. */
export const StdinQuery = Schema.Struct({ close: Flag })
export type StdinQuery = typeof StdinQuery.Encoded
/** `POST /exec/<id>/resize`. */
export const ResizeQuery = Schema.Struct({ cols: Num, rows: Num })
export type ResizeQuery = typeof ResizeQuery.Encoded
/** `GET /files`: at most `limit` bytes from `offset`. */
export const ReadQuery = Schema.Struct({ path: JailPath, offset: Num, limit: Num })
export type ReadQuery = typeof ReadQuery.Encoded
/** `PUT /files` (the body is the bytes, at most `limit` of them). */
export const WriteQuery = Schema.Struct({ path: JailPath, mode: Schema.Literal("create", "overwrite", "append"), parents: Flag, limit: Schema.optional(Num) })
export type WriteQuery = typeof WriteQuery.Encoded
/** `DELETE /files`. */
export const DeleteQuery = Schema.Struct({ path: JailPath, recursive: Flag })
export type DeleteQuery = typeof DeleteQuery.Encoded
/** `GET /stat`. */
export const StatQuery = Schema.Struct({ path: JailPath })
export type StatQuery = typeof StatQuery.Encoded
/** `GET /list`: at most `max` entries. */
export const ListQuery = Schema.Struct({ path: JailPath, recursive: Flag, max: Num })
export type ListQuery = typeof ListQuery.Encoded
/** `POST /mkdir`. */
export const MkdirQuery = Schema.Struct({ path: JailPath, parents: Flag })
export type MkdirQuery = typeof MkdirQuery.Encoded
/** `POST /desktop`: start the desktop at this size. */
export const DesktopQuery = Schema.Struct({ width: Num, height: Num })
export type DesktopQuery = typeof DesktopQuery.Encoded
/** `GET /desktop/screenshot`: the whole screen, or the region `x`, `y`, `width`, `height`. */
export const ScreenshotQuery = Schema.Struct({
  format: Schema.Literal("png", "jpeg"),
  cursor: Flag,
  quality: Schema.optional(Num),
  scale: Schema.optional(Num),
  x: Schema.optional(Num),
  y: Schema.optional(Num),
  width: Schema.optional(Num),
  height: Schema.optional(Num)
})
export type ScreenshotQuery = typeof ScreenshotQuery.Encoded

/** `route?query`, the query encoded by its Schema (a parameter left out is not sent). */
export const withQuery = <A, I extends { readonly [name: string]: string | undefined }>(route: string, schema: Schema.Schema<A, I>, params: A) => {
  const query = new URLSearchParams()
  for (const [name, value] of Object.entries(Schema.encodeSync(schema)(params))) if (value !== undefined) query.set(name, value)
  return `${route}?${query}`
}

const TerminalSize = Schema.Struct({ cols: int(1, 1000), rows: int(1, 1000) })

/** `POST /exec`: the command to start. */
export const ExecRequest = Schema.Struct({
  command: Schema.Array(Schema.String).pipe(Schema.minItems(1)),
  cwd: Schema.optional(Schema.String),
  env: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  timeoutMs: Schema.optional(int(1, Number.MAX_SAFE_INTEGER)),
  maxOutputBytes: Count,
  tag: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
  /** The command joins the sandbox's command cgroups (bound at /run/cgroup/) before it runs. */
  cgroup: Schema.optional(Schema.Boolean),
  /** Where cgroups are not available: per-command rlimits (processes, address space in KiB). */
  rlimits: Schema.optional(Schema.Struct({ nproc: Count, asKb: Count })),
  /** false: stdin is /dev/null (end-of-file at once); otherwise a pipe written through `/exec/<id>/stdin`. */
  stdin: Schema.optional(Schema.Boolean),
  /** Run on a pseudo-terminal of this size: one output stream, input typed through `/exec/<id>/stdin`. */
  pty: Schema.optional(TerminalSize)
})
export type ExecRequest = typeof ExecRequest.Type

/** `POST /desktop/action`: one input action (LocalRuntime.ts DesktopAction, already checked by the API's schema). */
export type { DesktopAction as DesktopActionRequest } from "./LocalRuntime.ts"

// Answers -----------------------------------------------------------------------------------------------------

/** Any non-2xx answer. */
export const ErrorAnswer = Schema.Struct({
  kind: Schema.Literal("not_found", "conflict", "invalid", "unavailable", "internal"),
  message: Schema.String
})
export type ErrorAnswer = typeof ErrorAnswer.Encoded

/** `/health`. */
export const HealthAnswer = Schema.Struct({ ok: Schema.Literal(true), pid: Count, execs: Count })
export type HealthAnswer = typeof HealthAnswer.Encoded

/** What a call that only acts answers (`/exec/<id>/stdin`, `/resize`, `/mkdir`). */
export const Acknowledged = Schema.Struct({ ok: Schema.Literal(true) })
export type Acknowledged = typeof Acknowledged.Encoded

/** `POST /exec`, `GET /exec/<id>`, `POST /exec/<id>/kill`. */
export const ExecInfoAnswer = Schema.Struct({
  execId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  tag: Schema.NullOr(text(200)),
  pid: int(0, 2 ** 31),
  state: Schema.Literal("running", "exited"),
  startedAt: Timestamp,
  exitCode: Schema.NullOr(Int32)
})
export type ExecInfoAnswer = typeof ExecInfoAnswer.Encoded

/** How an execution ended: the payload of its exit frame. */
export const ExitFields = Schema.Struct({
  exitCode: Schema.NullOr(Int32),
  signal: Schema.NullOr(text(32)),
  cancelled: Schema.Boolean,
  timedOut: Schema.Boolean,
  outputTruncated: Schema.Boolean
})
export type ExitFields = typeof ExitFields.Encoded

/** One frame of an execution's event log: output (base64) or its exit. */
export const ExecEventFrame = Schema.Union(
  Schema.Struct({ seq: Count, type: Schema.Literal("stdout", "stderr"), data: Schema.String }),
  Schema.Struct({ seq: Count, type: Schema.Literal("exit"), ...ExitFields.fields })
)
export type ExecEventFrame = typeof ExecEventFrame.Encoded

/** `GET /exec/<id>/events?from=&wait=`: frames from `from` on (contiguity is checked against the request). */
export const ExecEventsAnswer = Schema.Struct({ events: Schema.Array(ExecEventFrame) })
export type ExecEventsAnswer = typeof ExecEventsAnswer.Encoded

/** `PUT /files`. */
export const WriteAnswer = Schema.Struct({ bytesWritten: Count, created: Schema.Boolean })
export type WriteAnswer = typeof WriteAnswer.Encoded

export const FileEntry = Schema.Struct({
  path: Schema.String.pipe(Schema.maxLength(8192), Schema.startsWith("/")),
  type: Schema.Literal("file", "directory", "symlink", "other"),
  sizeBytes: Count,
  modifiedAt: Timestamp,
  mode: int(0, 0o7777)
})
export type FileEntry = typeof FileEntry.Encoded

/** `GET /stat`: null where nothing is at the path. */
export const StatAnswer = Schema.Struct({ entry: Schema.NullOr(FileEntry) })
export type StatAnswer = typeof StatAnswer.Encoded

/** `GET /list` (at most the `max` asked for: checked against the request). */
export const ListAnswer = Schema.Struct({ entries: Schema.Array(FileEntry), truncated: Schema.Boolean })
export type ListAnswer = typeof ListAnswer.Encoded

/** `DELETE /files`. */
export const DeleteAnswer = Schema.Struct({ deleted: Schema.Boolean })
export type DeleteAnswer = typeof DeleteAnswer.Encoded

/** `GET /files`: the bytes are the body; its head says the file's size and whether the read reached the end. */
export const ReadHead = Schema.Struct({ "x-size": headerInt(0, Number.MAX_SAFE_INTEGER), "x-eof": Schema.Literal("true", "false") })
export type ReadHead = typeof ReadHead.Encoded

/** `GET|POST /desktop`: the desktop as it is (after a start: running). */
export const DesktopAnswer = Schema.Union(
  Schema.Struct({
    running: Schema.Literal(true),
    display: Schema.String,
    width: int(1, MAX_SCREEN.width),
    height: int(1, MAX_SCREEN.height),
    liveViewPort: Schema.NullOr(Port)
  }),
  Schema.Struct({ running: Schema.Literal(false), display: Schema.String, width: Schema.Null, height: Schema.Null, liveViewPort: Schema.Null })
)
export type DesktopAnswer = typeof DesktopAnswer.Encoded

/** `POST /desktop/action`: where the pointer is afterwards. */
export const ActionAnswer = Schema.Struct({ ok: Schema.Literal(true), cursor: Schema.Struct({ x: Coordinate, y: Coordinate }) })
export type ActionAnswer = typeof ActionAnswer.Encoded

/** `GET /desktop/screenshot`: the image is the body; its head says its size and where the pointer is. */
export const ScreenshotHead = Schema.Struct({
  "x-width": headerInt(1, MAX_SCREEN.width),
  "x-height": headerInt(1, MAX_SCREEN.height),
  "x-cursor-x": headerInt(-32768, 32767),
  "x-cursor-y": headerInt(-32768, 32767)
})
export type ScreenshotHead = typeof ScreenshotHead.Encoded

/** A recording (`/desktop/recordings[/<id>[/stop]]`). */
export const RecordingAnswer = Schema.Struct({
  id: Schema.String.pipe(Schema.pattern(RECORDING_ID)),
  state: Schema.Literal("starting", "recording", "stopping", "stopped", "failed"),
  startedAt: Timestamp,
  stoppedAt: Schema.NullOr(Timestamp),
  sizeBytes: Schema.NullOr(Count),
  durationSeconds: Schema.Number.pipe(Schema.finite(), Schema.between(0, 10 * 365 * 86400))
})
export type RecordingAnswer = typeof RecordingAnswer.Encoded

/** `GET /desktop/recordings`. */
export const RecordingListAnswer = Schema.Struct({ recordings: Schema.Array(RecordingAnswer).pipe(Schema.maxItems(10_000)) })
export type RecordingListAnswer = typeof RecordingListAnswer.Encoded
