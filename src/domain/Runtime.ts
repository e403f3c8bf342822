/**
 * Runtime resources and requests (spec §2.6–2.9, §4.5–4.7, §8; reference §2 "Runtime"): processes, file
 * operations, endpoints and the provider capability manifest embedded in them.
 */
import { Schema } from "effect"
import { strict, Timestamp } from "./Accounts.ts"
import { ComputerActionResult, ComputerScreenshotResult } from "./Computer.ts"
import { ErrorObject } from "./Errors.ts"
import { EndpointId, ProcessId, ProjectId, RuntimeOperationId, SandboxId } from "./Ids.ts"
import { Provider, withDefault, WriteMode } from "./Sandbox.ts"

/** Absolute, 1–4096 characters, no NUL, no empty, `.` or `..` segments. */
export const PortablePath = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(4096),
  Schema.pattern(/^\/(?:[^/\0]+(?:\/[^/\0]+)*)?$/, { message: () => "must be an absolute path without empty segments or NUL" }),
  Schema.filter((p) => !p.split("/").some((segment) => segment === "." || segment === "..") || "must not contain . or .. segments")
).annotations({ identifier: "PortablePath" })

export const Capabilities = Schema.Struct({
  provider: Provider,
  version: Schema.String,
  lifecycle: Schema.Struct({ pause: Schema.Boolean, resume: Schema.Boolean }),
  process: Schema.Struct({
    execute: Schema.Boolean,
    cancel: Schema.Boolean,
    ordered_output: Schema.Boolean,
    max_timeout_seconds: Schema.NonNegativeInt,
    max_output_bytes: Schema.NonNegativeInt
  }),
  filesystem: Schema.Struct({
    read: Schema.Boolean,
    write: Schema.Boolean,
    write_modes: Schema.Array(WriteMode),
    create_parents: Schema.Boolean,
    list: Schema.Boolean,
    delete: Schema.Boolean,
    max_read_bytes: Schema.NonNegativeInt,
    max_write_bytes: Schema.NonNegativeInt
  }),
  http_endpoints: Schema.Struct({ create: Schema.Boolean, revoke: Schema.Boolean, max_lease_seconds: Schema.NonNegativeInt }),
  computer: Schema.NullOr(Schema.Struct({
    implementation: Schema.String,
    actions: Schema.Array(Schema.String),
    screenshot: Schema.Struct({ formats: Schema.Array(Schema.String), max_bytes: Schema.NonNegativeInt }),
    recording: Schema.Struct({ formats: Schema.Array(Schema.String) })
  }))
}).annotations({ identifier: "Capabilities" })

// Processes ---------------------------------------------------------------------------------------------------

export const EnvName = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(256),
  Schema.pattern(/^[^=\0]+$/, { message: () => "must not contain = or NUL" }),
  Schema.filter((k) => k !== "__proto__" || "__proto__ is not allowed as a key")
)

/** A pseudo-terminal's size. */
export const TerminalSize = Schema.Struct({
  cols: Schema.Int.pipe(Schema.between(1, 1000)),
  rows: Schema.Int.pipe(Schema.between(1, 1000))
}).annotations({ identifier: "TerminalSize", ...strict })

export const StartProcess = Schema.Struct({
  command: Schema.Array(Schema.String.pipe(Schema.maxLength(131_072))).pipe(Schema.minItems(1), Schema.maxItems(4096)),
  cwd: Schema.optional(PortablePath),
  environment: Schema.optional(Schema.Record({ key: EnvName, value: Schema.String.pipe(Schema.maxLength(16_384)) })),
  timeout_seconds: withDefault(Schema.Int.pipe(Schema.between(1, 3600)), 300),
  max_output_bytes: withDefault(Schema.Int.pipe(Schema.between(1, 104_857_600)), 10_485_760),
  /** Keep standard input open for `POST …/stdin` (else the process reads end-of-file at once). */
  stdin: withDefault(Schema.Boolean, false),
  /** Run on a pseudo-terminal of this size: one output stream, input through `…/attach` or `…/stdin`. */
  pty: Schema.optional(TerminalSize)
}).annotations({ identifier: "StartProcess", ...strict })


export const ProcessState = Schema.Literal("queued", "running", "cancelling", "succeeded", "failed", "cancelled", "timed_out")
  .annotations({ identifier: "ProcessState" })

export const Process = Schema.Struct({
  id: ProcessId,
  type: Schema.Literal("process"),
  project_id: ProjectId,
  sandbox_id: SandboxId,
  state: ProcessState,
  command: Schema.Array(Schema.String),
  cwd: Schema.NullOr(Schema.String),
  timeout_seconds: Schema.Int,
  max_output_bytes: Schema.Int,
  output_bytes: Schema.NonNegativeInt,
  output_truncated: Schema.Boolean,
  exit_code: Schema.NullOr(Schema.Int),
  termination_signal: Schema.NullOr(Schema.String),
  error: Schema.NullOr(ErrorObject),
  cancel_requested_at: Schema.NullOr(Timestamp),
  created_at: Timestamp,
  started_at: Schema.NullOr(Timestamp),
  completed_at: Schema.NullOr(Timestamp),
  /** Started with its standard input kept open; `stdin_closed_at`: when `eof` closed it. */
  stdin: Schema.Boolean,
  stdin_closed_at: Schema.NullOr(Timestamp),
  /** The terminal's current size for a process started with `pty`, else null. */
  pty: Schema.NullOr(TerminalSize),
  provider_capabilities: Schema.NullOr(Capabilities)
}).annotations({ identifier: "Process" })

/** The most of each stream a run-and-wait answer carries (its events keep all the output kept). */
export const OUTPUT_IN_ANSWER_BYTES = 1024 * 1024

/**
 * A run-and-wait's answer (`?wait_seconds`, 201): the finished process with its output, so `echo hi` takes one
 * call. Text when the bytes are UTF-8; otherwise the text with U+FFFD for what is not, plus the exact bytes.
 */
export const ProcessWithOutput = Schema.Struct({
  ...Process.fields,
  stdout: Schema.String.annotations({ description: "Standard output as UTF-8 text (at most 1 MiB; see output_capped)" }),
  stderr: Schema.String.annotations({ description: "Standard error as UTF-8 text (at most 1 MiB; see output_capped)" }),
  stdout_base64: Schema.optional(Schema.String).annotations({ description: "The exact bytes of stdout, only when they are not valid UTF-8" }),
  stderr_base64: Schema.optional(Schema.String).annotations({ description: "The exact bytes of stderr, only when they are not valid UTF-8" }),
  output_capped: Schema.Boolean.annotations({
    description: "True when this answer's 1 MiB per stream cut the output; the process's events hold all of it that was kept (output_truncated: max_output_bytes cut that)"
  })
}).annotations({ identifier: "ProcessWithOutput" })

/** Process output is chunked (at most 256 KiB a frame); offsets count bytes per stream from 0. */
const OutputChunk = Schema.Struct({
  data_base64: Schema.String,
  byte_length: Schema.NonNegativeInt,
  stream_offset_bytes: Schema.NonNegativeInt
})

const processFrame = <T extends string, D extends Schema.Schema.Any>(type: T, data: D) =>
  Schema.Struct({
    sequence: Schema.Int.pipe(Schema.positive()),
    process_id: ProcessId,
    type: Schema.Literal(type),
    occurred_at: Timestamp,
    data
  })

export const ProcessEventType = Schema.Literal(
  "queued", "started", "stdout", "stderr", "cancel_requested", "exited", "cancelled", "timed_out", "failed"
)
  .annotations({ identifier: "ProcessEventType" })

/**
 * The JSON of one frame's `data:` line in `GET …/processes/{id}/events` (batches of at most 100 frames and
 * 1 MiB). A nonzero exit is `exited` then `failed`; a timeout is `timed_out` only.
 */
export const ProcessEventFrame = Schema.Union(
  processFrame("queued", Schema.Struct({})),
  processFrame("started", Schema.Struct({ execution_id: Schema.optional(Schema.String) })),
  processFrame("stdout", OutputChunk),
  processFrame("stderr", OutputChunk),
  processFrame("cancel_requested", Schema.Struct({})),
  processFrame("exited", Schema.Struct({ exit_code: Schema.NullOr(Schema.Int) })),
  processFrame("cancelled", Schema.Struct({ termination_signal: Schema.NullOr(Schema.String) })),
  processFrame("timed_out", Schema.Struct({ timeout_seconds: Schema.Int, termination_signal: Schema.NullOr(Schema.String) })),
  processFrame("failed", ErrorObject)
).annotations({ identifier: "ProcessEventFrame" })
export type ProcessEventFrame = typeof ProcessEventFrame.Type

// Files and runtime operations --------------------------------------------------------------------------------

export const ReadFile = Schema.Struct({
  path: PortablePath,
  offset_bytes: withDefault(Schema.Int.pipe(Schema.between(0, Number.MAX_SAFE_INTEGER)), 0),
  limit_bytes: withDefault(Schema.Int.pipe(Schema.between(1, 10_485_760)), 1_048_576)
}).annotations({ identifier: "ReadFile", ...strict })

export const MAX_WRITE_BYTES = 10 * 1024 * 1024
/**
 * Standard base64 (padded). A search for a character outside the alphabet (no backtracking, ~12 ms over 14 MB;
 * an anchored pattern with a quantifier over the whole text is what JavaScriptCore gives up on), then `=` only as
 * the last one or two characters.
 */
const NOT_BASE64 = /[^A-Za-z0-9+/=]/
const isBase64 = (s: string): boolean => {
  if (s.length % 4 !== 0 || NOT_BASE64.test(s)) return false
  const firstPad = s.indexOf("=")
  return firstPad === -1 || (firstPad >= s.length - 2 && (firstPad === s.length - 1 || s[s.length - 1] === "="))
}

/** Bytes that a valid base64 string decodes to. */
export const decodedLength = (s: string): number => (s.length / 4) * 3 - (s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0)

export const Base64Data = Schema.String.pipe(
  // The character bound is checked first, so an oversized body fails fast; the exact bound is on decoded bytes.
  Schema.maxLength(Math.ceil(MAX_WRITE_BYTES / 3) * 4),
  Schema.filter((s) => isBase64(s) || "must be standard base64", {
    arbitrary: () => (fc) => fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes).toString("base64"))
  }),
  Schema.filter((s) => decodedLength(s) <= MAX_WRITE_BYTES || `must decode to at most ${MAX_WRITE_BYTES} bytes (10 MiB)`)
).annotations({ identifier: "Base64Data", description: "Standard base64, at most 10 MiB decoded" })

export const WriteFile = Schema.Struct({
  path: PortablePath,
  data_base64: Base64Data,
  mode: withDefault(WriteMode, "overwrite"),
  create_parents: withDefault(Schema.Boolean, false)
}).annotations({ identifier: "WriteFile", ...strict })

/** Input written to a process started with `stdin: true`: at most 1 MiB a call. */
export const MAX_STDIN_BYTES = 1024 * 1024
export const WriteStdin = Schema.Struct({
  data_base64: withDefault(Base64Data.pipe(Schema.filter((s) => decodedLength(s) <= MAX_STDIN_BYTES || "must decode to at most 1 MiB (1048576 bytes)")), ""),
  eof: withDefault(Schema.Boolean, false)
}).annotations({ identifier: "WriteStdin", ...strict })

export const StdinWritten = Schema.Struct({
  process_id: ProcessId,
  bytes_written: Schema.NonNegativeInt,
  eof: Schema.Boolean
}).annotations({ identifier: "StdinWritten" })

/** `?path=` of the raw file routes. */
export const RawFileParams = Schema.Struct({ path: PortablePath })
/** A raw read's conditional headers (a malformed Range is a 416, not a validation error; only length is checked here). */
export const RawReadHeaders = Schema.Struct({
  range: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  "if-none-match": Schema.optional(Schema.String.pipe(Schema.maxLength(1000)))
})
/** `?path=&mode=&create_parents=` of a raw write. */
export const RawWriteParams = Schema.Struct({
  path: PortablePath,
  mode: withDefault(WriteMode, "overwrite"),
  create_parents: withDefault(Schema.BooleanFromString, false)
})
export const RawWritten = Schema.Struct({ path: Schema.String, size_bytes: Schema.NonNegativeInt }).annotations({ identifier: "RawWritten" })

export const ListFiles = Schema.Struct({
  path: PortablePath,
  recursive: withDefault(Schema.Boolean, false),
  max_entries: withDefault(Schema.Int.pipe(Schema.between(1, 10_000)), 1000)
}).annotations({ identifier: "ListFiles", ...strict })

export const DeleteFile = Schema.Struct({
  path: PortablePath,
  recursive: withDefault(Schema.Boolean, false)
}).annotations({ identifier: "DeleteFile", ...strict })

export const FileEntry = Schema.Struct({
  path: Schema.String,
  type: Schema.Literal("file", "directory", "symlink", "other"),
  size_bytes: Schema.NonNegativeInt,
  modified_at: Timestamp
})

export const FilesystemReadResult = Schema.Struct({
  kind: Schema.Literal("filesystem_read"),
  path: Schema.String,
  data_base64: Schema.String,
  offset_bytes: Schema.NonNegativeInt,
  byte_length: Schema.NonNegativeInt,
  size_bytes: Schema.optional(Schema.NonNegativeInt),
  eof: Schema.Boolean
})
export const FilesystemWriteResult = Schema.Struct({ kind: Schema.Literal("filesystem_write"), path: Schema.String, bytes_written: Schema.NonNegativeInt, created: Schema.Boolean })
export const FilesystemListResult = Schema.Struct({ kind: Schema.Literal("filesystem_list"), path: Schema.String, entries: Schema.Array(FileEntry), truncated: Schema.Boolean })
export const FilesystemDeleteResult = Schema.Struct({ kind: Schema.Literal("filesystem_delete"), path: Schema.String, deleted: Schema.Boolean })

export const RuntimeOperationResult = Schema.Union(FilesystemReadResult, FilesystemWriteResult, FilesystemListResult, FilesystemDeleteResult, ComputerActionResult, ComputerScreenshotResult)
  .annotations({ identifier: "RuntimeOperationResult" })

export const RuntimeOperation = Schema.Struct({
  id: RuntimeOperationId,
  type: Schema.Literal("runtime_operation"),
  project_id: ProjectId,
  sandbox_id: SandboxId,
  kind: Schema.Literal("filesystem_read", "filesystem_write", "filesystem_list", "filesystem_delete", "computer_action", "computer_screenshot"),
  state: Schema.Literal("queued", "running", "succeeded", "failed", "cancelled"),
  result: Schema.NullOr(RuntimeOperationResult),
  error: Schema.NullOr(ErrorObject),
  created_at: Timestamp,
  started_at: Schema.NullOr(Timestamp),
  completed_at: Schema.NullOr(Timestamp),
  provider_capabilities: Schema.NullOr(Capabilities)
}).annotations({ identifier: "RuntimeOperation" })

// Endpoints -------------------------------------------------------------------------------------------------

export const CreateEndpoint = Schema.Struct({
  port: Schema.Int.pipe(Schema.between(1, 65_535)),
  protocol: withDefault(Schema.Literal("http"), "http"),
  lease_seconds: withDefault(Schema.Int.pipe(Schema.between(60, 86_400)), 3600)
}).annotations({ identifier: "CreateEndpoint", ...strict })

export const Endpoint = Schema.Struct({
  id: EndpointId,
  type: Schema.Literal("sandbox_endpoint"),
  project_id: ProjectId,
  sandbox_id: SandboxId,
  port: Schema.Int,
  protocol: Schema.String,
  state: Schema.Literal("provisioning", "active", "revoking", "revoked", "expired", "failed"),
  url: Schema.String,
  lease_expires_at: Timestamp,
  revoked_at: Schema.NullOr(Timestamp),
  error: Schema.NullOr(ErrorObject),
  created_at: Timestamp,
  updated_at: Timestamp,
  provider_capabilities: Schema.NullOr(Capabilities)
}).annotations({ identifier: "Endpoint" })

export const EndpointList = Schema.Struct({ endpoints: Schema.Array(Endpoint), next_cursor: Schema.NullOr(Schema.String) }).annotations({ identifier: "EndpointList" })
