/**
 * Prime's command sessions over the Connect protocol with the protobuf codec: the part of
 * `command_session/command_session.proto` (Prime's SDK, prime-sandboxes) that the adapter and the emulator speak,
 * declared here as a FileDescriptorProto and compiled by @bufbuild/protobuf at load — a schema in code, not bytes
 * written by hand. Field numbers and types are Prime's:
 *
 *   message CommandSpec { string cmd = 1; repeated string args = 2; map<string, string> envs = 3;
 *                         optional string cwd = 4; optional string user = 5; }
 *   message PTY { message Size { uint32 cols = 1; uint32 rows = 2; } Size size = 1; }
 *   message StartRequest { CommandSpec command = 1; optional PTY pty = 2; optional bool stdin = 4;
 *                          optional string session_uuid = 5; }            // 3 was `tag`, reserved
 *   message CommandSessionEvent {
 *     oneof event { StartEvent start = 1; DataEvent data = 2; EndEvent end = 3; KeepAlive keepalive = 4; }
 *     message StartEvent { uint32 pid = 1; }
 *     message DataEvent { oneof output { bytes stdout = 1; bytes stderr = 2; bytes pty = 3; } }
 *     message EndEvent { sint32 exit_code = 1; bool exited = 2; string status = 3; optional string error = 4; }
 *     message KeepAlive {} }
 *   message StartResponse { CommandSessionEvent event = 1; }
 *   service CommandSession { rpc Start(StartRequest) returns (stream StartResponse); … }
 *
 * Connect streaming (connectrpc.com/docs/protocol): the request and response bodies
 * (`application/connect+proto`) are envelopes — 1 flag byte, a 4-byte big-endian length, the message. The last
 * response envelope has flag 0x02 (end of stream) and carries a JSON trailer, `{}` or `{"error": {code, message}}`
 * (JSON whatever the codec). The exit code is a zigzag `sint32`.
 */
import { END_STREAM, type Frame, frame, FrameDecoder } from "../core/connect.ts"
import { create, createFileRegistry, type DescMessage, fromBinary, type Message, toBinary } from "@bufbuild/protobuf"
import type { GenMessage } from "@bufbuild/protobuf/codegenv2"
import {
  type DescriptorProto,
  DescriptorProtoSchema,
  type FieldDescriptorProto,
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
  FieldDescriptorProtoSchema,
  FileDescriptorProtoSchema,
  MessageOptionsSchema,
  OneofDescriptorProtoSchema
} from "@bufbuild/protobuf/wkt"

export const SERVICE = "command_session.CommandSession"
export const START_PATH = `/${SERVICE}/Start`
export const STREAM_CONTENT_TYPE = "application/connect+proto"
export { COMPRESSED, END_STREAM, EnvelopeError } from "../core/connect.ts"
/** Refuse to buffer more than this for one message (output arrives in small chunks). */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024

// ---- the schema ----

const field = (
  name: string,
  number: number,
  type: Type,
  extra: { readonly repeated?: boolean; readonly typeName?: string; readonly oneofIndex?: number; readonly optional?: boolean } = {}
): FieldDescriptorProto =>
  create(FieldDescriptorProtoSchema, {
    name,
    number,
    type,
    label: extra.repeated === true ? Label.REPEATED : Label.OPTIONAL,
    jsonName: name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()),
    ...(extra.typeName === undefined ? {} : { typeName: extra.typeName }),
    ...(extra.oneofIndex === undefined ? {} : { oneofIndex: extra.oneofIndex }),
    ...(extra.optional === true ? { proto3Optional: true } : {})
  })

/** A message; proto3 `optional` fields get their synthetic oneof (`_<name>`), as protoc makes them. */
const message = (
  name: string,
  fields: ReadonlyArray<FieldDescriptorProto>,
  extra: { readonly nested?: ReadonlyArray<DescriptorProto>; readonly oneofs?: ReadonlyArray<string>; readonly mapEntry?: boolean } = {}
): DescriptorProto => {
  const oneofs = [...(extra.oneofs ?? [])]
  const withSynthetic = fields.map((f) => {
    if (!f.proto3Optional) return f
    oneofs.push(`_${f.name}`)
    return create(FieldDescriptorProtoSchema, { ...f, oneofIndex: oneofs.length - 1 })
  })
  return create(DescriptorProtoSchema, {
    name,
    field: withSynthetic,
    nestedType: [...(extra.nested ?? [])],
    oneofDecl: oneofs.map((n) => create(OneofDescriptorProtoSchema, { name: n })),
    ...(extra.mapEntry === true ? { options: create(MessageOptionsSchema, { mapEntry: true }) } : {})
  })
}

const P = ".command_session"

const FILE = create(FileDescriptorProtoSchema, {
  name: "command_session/command_session.proto",
  package: "command_session",
  syntax: "proto3",
  messageType: [
    message("PTY", [field("size", 1, Type.MESSAGE, { typeName: `${P}.PTY.Size` })], {
      nested: [message("Size", [field("cols", 1, Type.UINT32), field("rows", 2, Type.UINT32)])]
    }),
    message("CommandSpec", [
      field("cmd", 1, Type.STRING),
      field("args", 2, Type.STRING, { repeated: true }),
      field("envs", 3, Type.MESSAGE, { repeated: true, typeName: `${P}.CommandSpec.EnvsEntry` }),
      field("cwd", 4, Type.STRING, { optional: true }),
      field("user", 5, Type.STRING, { optional: true })
    ], { nested: [message("EnvsEntry", [field("key", 1, Type.STRING), field("value", 2, Type.STRING)], { mapEntry: true })] }),
    message("StartRequest", [
      field("command", 1, Type.MESSAGE, { typeName: `${P}.CommandSpec` }),
      field("pty", 2, Type.MESSAGE, { typeName: `${P}.PTY`, optional: true }),
      field("stdin", 4, Type.BOOL, { optional: true }),
      field("session_uuid", 5, Type.STRING, { optional: true })
    ]),
    message("CommandSessionEvent", [
      field("start", 1, Type.MESSAGE, { typeName: `${P}.CommandSessionEvent.StartEvent`, oneofIndex: 0 }),
      field("data", 2, Type.MESSAGE, { typeName: `${P}.CommandSessionEvent.DataEvent`, oneofIndex: 0 }),
      field("end", 3, Type.MESSAGE, { typeName: `${P}.CommandSessionEvent.EndEvent`, oneofIndex: 0 }),
      field("keepalive", 4, Type.MESSAGE, { typeName: `${P}.CommandSessionEvent.KeepAlive`, oneofIndex: 0 })
    ], {
      oneofs: ["event"],
      nested: [
        message("StartEvent", [field("pid", 1, Type.UINT32)]),
        message("DataEvent", [
          field("stdout", 1, Type.BYTES, { oneofIndex: 0 }),
          field("stderr", 2, Type.BYTES, { oneofIndex: 0 }),
          field("pty", 3, Type.BYTES, { oneofIndex: 0 })
        ], { oneofs: ["output"] }),
        message("EndEvent", [
          field("exit_code", 1, Type.SINT32),
          field("exited", 2, Type.BOOL),
          field("status", 3, Type.STRING),
          field("error", 4, Type.STRING, { optional: true })
        ]),
        message("KeepAlive", [])
      ]
    }),
    message("StartResponse", [field("event", 1, Type.MESSAGE, { typeName: `${P}.CommandSessionEvent` })])
  ]
})

const registry = createFileRegistry(FILE, () => undefined)

/**
 * The compiled descriptor of one message, typed with its shape (what protoc-gen-es would generate for it). The
 * shape is checked against the descriptor by the wire tests (encodes and decodes of known bytes).
 */
const messageSchema = <M extends Message>(typeName: M["$typeName"]): GenMessage<M> => {
  const desc: DescMessage | undefined = registry.getMessage(typeName)
  if (desc === undefined) throw new Error(`the command_session schema has no ${typeName}`)
  return desc as GenMessage<M>
}

// ---- the shapes ----

export type CommandSpec = Message<"command_session.CommandSpec"> & {
  cmd: string
  args: Array<string>
  envs: { [key: string]: string }
  cwd?: string
  user?: string
}
export type PtySize = Message<"command_session.PTY.Size"> & { cols: number; rows: number }
export type Pty = Message<"command_session.PTY"> & { size?: PtySize }
export type StartRequest = Message<"command_session.StartRequest"> & {
  command?: CommandSpec
  pty?: Pty
  stdin?: boolean
  sessionUuid?: string
}
export type StartEvent = Message<"command_session.CommandSessionEvent.StartEvent"> & { pid: number }
export type DataEvent = Message<"command_session.CommandSessionEvent.DataEvent"> & {
  output:
    | { case: "stdout"; value: Uint8Array }
    | { case: "stderr"; value: Uint8Array }
    | { case: "pty"; value: Uint8Array }
    | { case: undefined; value?: undefined }
}
export type EndEvent = Message<"command_session.CommandSessionEvent.EndEvent"> & {
  exitCode: number
  exited: boolean
  status: string
  error?: string
}
export type KeepAlive = Message<"command_session.CommandSessionEvent.KeepAlive">
export type CommandSessionEvent = Message<"command_session.CommandSessionEvent"> & {
  event:
    | { case: "start"; value: StartEvent }
    | { case: "data"; value: DataEvent }
    | { case: "end"; value: EndEvent }
    | { case: "keepalive"; value: KeepAlive }
    | { case: undefined; value?: undefined }
}
export type StartResponse = Message<"command_session.StartResponse"> & { event?: CommandSessionEvent }

export const CommandSpecSchema = messageSchema<CommandSpec>("command_session.CommandSpec")
export const StartRequestSchema = messageSchema<StartRequest>("command_session.StartRequest")
export const CommandSessionEventSchema = messageSchema<CommandSessionEvent>("command_session.CommandSessionEvent")
export const StartResponseSchema = messageSchema<StartResponse>("command_session.StartResponse")

/** The event of a StartResponse, in plain terms. */
export type SessionEvent =
  | { readonly type: "start"; readonly pid: number }
  | { readonly type: "stdout" | "stderr" | "pty"; readonly data: Uint8Array }
  | { readonly type: "end"; readonly exitCode: number; readonly exited: boolean; readonly status: string; readonly error: string | undefined }
  | { readonly type: "keepalive" }

export const encodeStartRequest = (init: {
  readonly cmd: string
  readonly args: ReadonlyArray<string>
  readonly envs: Readonly<Record<string, string>>
  readonly cwd?: string | undefined
  readonly stdin?: boolean | undefined
}): Uint8Array =>
  toBinary(
    StartRequestSchema,
    create(StartRequestSchema, {
      command: { cmd: init.cmd, args: [...init.args], envs: { ...init.envs }, ...(init.cwd === undefined ? {} : { cwd: init.cwd }) },
      ...(init.stdin === undefined ? {} : { stdin: init.stdin })
    })
  )

export const decodeStartRequest = (bytes: Uint8Array): StartRequest => fromBinary(StartRequestSchema, bytes)

export const encodeStartResponse = (event: SessionEvent): Uint8Array => {
  const e: CommandSessionEvent["event"] = event.type === "start"
    ? { case: "start", value: create(nested<StartEvent>("StartEvent"), { pid: event.pid }) }
    : event.type === "end"
    ? {
      case: "end",
      value: create(nested<EndEvent>("EndEvent"), {
        exitCode: event.exitCode,
        exited: event.exited,
        status: event.status,
        ...(event.error === undefined ? {} : { error: event.error })
      })
    }
    : event.type === "keepalive"
    ? { case: "keepalive", value: create(nested<KeepAlive>("KeepAlive")) }
    : { case: "data", value: create(nested<DataEvent>("DataEvent"), { output: { case: event.type, value: event.data } }) }
  return toBinary(StartResponseSchema, create(StartResponseSchema, { event: create(CommandSessionEventSchema, { event: e }) }))
}

export const decodeStartResponse = (bytes: Uint8Array): SessionEvent | null => {
  const event = fromBinary(StartResponseSchema, bytes).event?.event
  switch (event?.case) {
    case "start":
      return { type: "start", pid: event.value.pid }
    case "data":
      return event.value.output.case === undefined ? null : { type: event.value.output.case, data: event.value.output.value }
    case "end":
      return { type: "end", exitCode: event.value.exitCode, exited: event.value.exited, status: event.value.status, error: event.value.error }
    case "keepalive":
      return { type: "keepalive" }
    default:
      return null
  }
}

// ---- Connect envelopes (the kit's framing, protobuf messages) ----

export const envelope = frame

/** The end-of-stream envelope: its trailer is JSON. */
export const endOfStream = (error?: { readonly code: string; readonly message: string }) =>
  frame(new TextEncoder().encode(JSON.stringify(error === undefined ? {} : { error })), END_STREAM)

export type Envelope = Frame

/** Incremental decoder: push bytes as they arrive, take whole envelopes. Throws `EnvelopeError` on bad input. */
export class EnvelopeDecoder extends FrameDecoder {
  constructor() {
    super(MAX_MESSAGE_BYTES)
  }
}

/** The error of an end-of-stream trailer (or of a non-streaming error body), if any. */
export const trailerError = (data: Uint8Array): { readonly code: string; readonly message: string } | null => {
  let parsed: unknown
  try {
    parsed = JSON.parse(new TextDecoder().decode(data))
  } catch {
    return { code: "internal", message: "the end of the stream is not JSON" }
  }
  const error = (parsed as { error?: { code?: unknown; message?: unknown } } | null)?.error
  if (error === undefined || error === null) return null
  return { code: typeof error.code === "string" ? error.code : "unknown", message: typeof error.message === "string" ? error.message : "" }
}

const nested = <M extends Message>(name: string): GenMessage<M> => messageSchema<M>(`command_session.CommandSessionEvent.${name}` as M["$typeName"])
