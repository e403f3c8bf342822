/**
 * The MCP server's tools: each one a short sequence of the gateway's own API calls (made in-process, with the
 * caller's credentials, so every check, limit and error is the API's), waiting where an agent would otherwise
 * poll. Input schemas are the API's request Schemas (as JSON Schema) plus `sandbox_id`; a failed call is a tool
 * error carrying the envelope's `code` and `message`.
 */
import { JSONSchema, Schema } from "effect"
import { SandboxId } from "../domain/Ids.ts"
import { ComputerAction, TakeScreenshot } from "../domain/Computer.ts"
import { CreateEndpoint, ListFiles, ReadFile, StartProcess, WriteFile } from "../domain/Runtime.ts"
import { Provider, SandboxRequest, SandboxState } from "../domain/Sandbox.ts"

/** One API call made for a tool: status and body (decoded JSON; text for other types; undefined when none). */
export interface ApiAnswer {
  readonly status: number
  readonly body: any
}
export type ApiCall = (method: "GET" | "POST" | "DELETE", path: string, body?: unknown, headers?: Record<string, string>) => Promise<ApiAnswer>

export interface ToolResult {
  readonly content: ReadonlyArray<{ readonly type: "text"; readonly text: string } | { readonly type: "image"; readonly data: string; readonly mimeType: string }>
  readonly structuredContent?: Record<string, unknown> | undefined
  readonly isError?: boolean | undefined
}

export interface Tool {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly inputSchema: Record<string, unknown>
  readonly run: (args: Record<string, unknown>, api: ApiCall) => Promise<ToolResult>
}

/** Output returned to the agent is capped (per stream): the full output stays readable through the API. */
const MAX_TEXT_BYTES = 256 * 1024
const POLL_MS = 50
/** The API takes at most 1 MiB of input a call. */
const STDIN_PIECE = 1024 * 1024

/** A tool failed: the API's error envelope (or a message of ours in the same shape). */
class ToolFailure extends Error {
  constructor(readonly code: string, message: string, readonly details?: unknown) {
    super(message)
  }
}

const ok = (answer: ApiAnswer, ...statuses: ReadonlyArray<number>) => {
  if (statuses.includes(answer.status)) return answer.body
  const b = answer.body as { code?: unknown; message?: unknown; details?: unknown } | undefined
  throw new ToolFailure(typeof b?.code === "string" ? b.code : `http_${answer.status}`, typeof b?.message === "string" ? b.message : `The gateway answered ${answer.status}`, b?.details)
}

/** Polls `read` until `done`, at most `seconds`; the last value either way. */
const waitFor = async <T>(read: () => Promise<T>, done: (value: T) => boolean, seconds: number): Promise<T> => {
  const deadline = Date.now() + seconds * 1000
  for (;;) {
    const value = await read()
    if (done(value) || Date.now() >= deadline) return value
    await Bun.sleep(POLL_MS)
  }
}

/** A JSON Schema object for `schema` (top-level $ref inlined, $defs kept), with `sandbox_id` and extra properties. */
const inputSchema = (schema: Schema.Schema.AnyNoContext | undefined, extra: Record<string, Record<string, unknown>> = {}, required: ReadonlyArray<string> = []) => {
  const made = (schema === undefined ? { type: "object", properties: {}, required: [] } : JSONSchema.make(schema)) as Record<string, any>
  const defs = made["$defs"] as Record<string, any> | undefined
  const ref = typeof made["$ref"] === "string" ? (made["$ref"] as string).replace("#/$defs/", "") : undefined
  const body = ref !== undefined && defs !== undefined ? defs[ref] : made
  const { $schema: _s, $defs: _d, $ref: _r, ...rest } = { ...made, ...body }
  return {
    ...rest,
    type: "object",
    properties: { ...extra, ...(rest["properties"] ?? {}) },
    required: [...new Set([...required, ...((rest["required"] as Array<string> | undefined) ?? [])])],
    ...(defs !== undefined ? { $defs: defs } : {})
  }
}

const SANDBOX_ID = { type: "string", pattern: "^sbx_[A-Za-z0-9]+$", description: "The sandbox (sbx_…)" }
const decodeSandboxId = Schema.decodeUnknownSync(Schema.Struct({ sandbox_id: SandboxId }))

/** The sandbox id of a tool call (checked: it becomes part of an API path) and the remaining arguments. */
const split = (args: Record<string, unknown>) => {
  let id: string
  try {
    id = decodeSandboxId({ sandbox_id: args["sandbox_id"] }).sandbox_id
  } catch {
    throw new ToolFailure("validation_error", "sandbox_id must be a sandbox id (sbx_…)")
  }
  const { sandbox_id: _, ...rest } = args
  return { id, rest }
}

const seconds = (value: unknown, fallback: number, max: number) => {
  if (value === undefined) return fallback
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > max) throw new ToolFailure("validation_error", `a wait must be a whole number of seconds from 1 to ${max}`)
  return value
}

const text = (value: unknown): ToolResult => ({ content: [{ type: "text", text: JSON.stringify(value, null, 2) }], structuredContent: value as Record<string, unknown> })

const runtimeOperation = async (api: ApiCall, id: string, kind: "read" | "write" | "list" | "screenshots" | "actions", payload: unknown) => {
  const route = kind === "screenshots" || kind === "actions" ? `computer/${kind}` : `filesystem/${kind}`
  // An action needs an Idempotency-Key: each tool call is one action.
  const started = ok(await api("POST", `/v1/sandboxes/${id}/${route}`, payload, kind === "actions" ? { "idempotency-key": `mcp-${crypto.randomUUID()}` } : {}), 202)
  const op = await waitFor(async () => ok(await api("GET", `/v1/sandboxes/${id}/runtime-operations/${started.id}`), 200), (o) => !["queued", "running"].includes(o.state), 120)
  if (op.state !== "succeeded") throw new ToolFailure(op.error?.code ?? "runtime_operation_failed", op.error?.message ?? `The operation ended ${op.state}`, op.error?.details)
  return op.result
}

/** Reads a finished process's output from its event batches, each stream capped at MAX_TEXT_BYTES. */
const processOutput = async (api: ApiCall, sandboxId: string, processId: string) => {
  const chunks = { stdout: [] as Array<Buffer>, stderr: [] as Array<Buffer> }
  const size = { stdout: 0, stderr: 0 }
  let last = 0
  for (;;) {
    const res = await api("GET", `/v1/sandboxes/${sandboxId}/processes/${processId}/events`, undefined, { "last-event-id": String(last) })
    const frames = typeof res.body === "string" ? res.body.split("\n\n").filter((f: string) => f.includes("data: ")) : []
    if (res.status !== 200 || frames.length === 0) break
    for (const frame of frames) {
      const data = JSON.parse(frame.split("\n").find((l: string) => l.startsWith("data: "))!.slice(6))
      last = data.sequence
      if (data.type !== "stdout" && data.type !== "stderr") continue
      const stream = data.type as "stdout" | "stderr"
      const bytes = Buffer.from(data.data.data_base64, "base64")
      if (size[stream] < MAX_TEXT_BYTES) chunks[stream].push(bytes.subarray(0, MAX_TEXT_BYTES - size[stream]))
      size[stream] += bytes.length
    }
  }
  const render = (stream: "stdout" | "stderr") =>
    Buffer.concat(chunks[stream]).toString("utf8") + (size[stream] > MAX_TEXT_BYTES ? `\n[… ${size[stream] - MAX_TEXT_BYTES} more bytes]` : "")
  return { stdout: render("stdout"), stderr: render("stderr") }
}

/** Text of at most MAX_TEXT_BYTES (UTF-8), saying how much more there was. */
const capText = (value: string) => {
  const bytes = Buffer.from(value, "utf8")
  return bytes.length <= MAX_TEXT_BYTES ? value : `${bytes.subarray(0, MAX_TEXT_BYTES).toString("utf8")}\n[… ${bytes.length - MAX_TEXT_BYTES} more bytes]`
}

/** list_sandboxes' filters: the list route's query (GET /v1/sandboxes), as JSON. */
const ListSandboxesArgs = Schema.Struct({
  state: Schema.optional(Schema.Array(SandboxState).pipe(Schema.minItems(1), Schema.maxItems(14))).annotations({ description: "Any of these states" }),
  provider: Schema.optional(Provider),
  metadata: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })).annotations({ description: "Metadata entries that must all match (up to 16)" }),
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, 100))).annotations({ description: "Page size (default 50)" }),
  cursor: Schema.optional(Schema.String).annotations({ description: "next_cursor of the previous page" })
})

/** The list route's query string from list_sandboxes' arguments (the API checks every value). */
const listQuery = (args: Record<string, unknown>) => {
  const query = new URLSearchParams()
  const { state, provider, metadata, limit, cursor, ...unknown } = args
  const extra = Object.keys(unknown)
  if (extra.length > 0) throw new ToolFailure("validation_error", `unknown argument${extra.length > 1 ? "s" : ""}: ${extra.join(", ").slice(0, 200)}`)
  if (state !== undefined) {
    if (!Array.isArray(state) || !state.every((s) => typeof s === "string")) throw new ToolFailure("validation_error", "state must be a list of sandbox states")
    for (const s of state) query.append("state", s)
  }
  if (provider !== undefined) query.set("provider", String(provider))
  if (metadata !== undefined) {
    if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) throw new ToolFailure("validation_error", "metadata must be an object of strings")
    for (const [key, value] of Object.entries(metadata)) {
      if (typeof value !== "string") throw new ToolFailure("validation_error", `metadata.${key.slice(0, 100)} must be a string`)
      query.set(`metadata.${key}`, value)
    }
  }
  if (limit !== undefined) query.set("limit", String(limit))
  if (cursor !== undefined) query.set("cursor", String(cursor))
  return query.toString()
}

/** A sandbox action (pause, resume, destroy): its operation once it has ended, or as it is after `waitSeconds`. */
const sandboxAction = async (api: ApiCall, method: "POST" | "DELETE", path: string, waitSeconds: number) => {
  const mutation = ok(await api(method, path), 202)
  return waitFor(async () => ok(await api("GET", `/v1/operations/${mutation.operation.id}`), 200), (o) => ["succeeded", "failed", "cancelled"].includes(o.state), waitSeconds)
}

/** Pause or resume, then the sandbox as it is; a failed operation is the tool's error. */
const pauseOrResume = async (api: ApiCall, args: Record<string, unknown>, action: "pause" | "resume") => {
  const { id, rest } = split(args)
  const operation = await sandboxAction(api, "POST", `/v1/sandboxes/${id}/actions/${action}`, seconds(rest["wait_seconds"], 120, 300))
  if (operation.state === "failed") throw new ToolFailure(operation.error?.code ?? "operation_failed", operation.error?.message ?? `The ${action} failed`, operation.error?.details)
  return text(ok(await api("GET", `/v1/sandboxes/${id}`), 200))
}

/** A `wait_seconds` argument (1-300). */
const waitProperty = (what: string, fallback: number) => ({ type: "integer", minimum: 1, maximum: 300, description: `How long to wait for ${what} (default ${fallback})` })

export const TOOLS: ReadonlyArray<Tool> = [
  {
    name: "create_sandbox",
    title: "Create a sandbox",
    description: "Creates a sandbox (the body of POST /v1/sandboxes) and waits until it is ready (at most wait_seconds, default 120). Returns the sandbox.",
    inputSchema: inputSchema(SandboxRequest, { wait_seconds: waitProperty("ready", 120) }),
    run: async (args, api) => {
      const { wait_seconds, ...request } = args
      const wait = seconds(wait_seconds, 120, 300)
      const created = ok(await api("POST", "/v1/sandboxes", request), 202)
      await waitFor(async () => ok(await api("GET", `/v1/operations/${created.operation.id}`), 200), (o) => ["succeeded", "failed", "cancelled"].includes(o.state), wait)
      const sandbox = ok(await api("GET", `/v1/sandboxes/${created.sandbox.id}`), 200)
      if (sandbox.state === "failed") throw new ToolFailure(sandbox.state_reason ?? "sandbox_failed", `The sandbox could not be created: ${sandbox.state_reason ?? "failed"}`)
      return text(sandbox)
    }
  },
  {
    name: "list_sandboxes",
    title: "List sandboxes",
    description: "Lists the project's sandboxes, newest first, filtered by state (any of them), provider and metadata (all must match); next_cursor pages on.",
    inputSchema: inputSchema(ListSandboxesArgs),
    run: async (args, api) => {
      const query = listQuery(args)
      return text(ok(await api("GET", `/v1/sandboxes${query === "" ? "" : `?${query}`}`), 200))
    }
  },
  {
    name: "get_sandbox",
    title: "Get a sandbox",
    description: "Returns one sandbox: its state, provider, resources, network and when it expires.",
    inputSchema: inputSchema(undefined, { sandbox_id: SANDBOX_ID }, ["sandbox_id"]),
    run: async (args, api) => {
      const { id } = split(args)
      return text(ok(await api("GET", `/v1/sandboxes/${id}`), 200))
    }
  },
  {
    name: "pause_sandbox",
    title: "Pause a sandbox",
    description: "Pauses a ready sandbox (its processes are frozen, it stops costing compute) and waits until it is paused (at most wait_seconds, default 120). Returns the sandbox.",
    inputSchema: inputSchema(undefined, { sandbox_id: SANDBOX_ID, wait_seconds: waitProperty("the pause", 120) }, ["sandbox_id"]),
    run: (args, api) => pauseOrResume(api, args, "pause")
  },
  {
    name: "resume_sandbox",
    title: "Resume a sandbox",
    description: "Resumes a paused sandbox and waits until it is ready again (at most wait_seconds, default 120). Returns the sandbox.",
    inputSchema: inputSchema(undefined, { sandbox_id: SANDBOX_ID, wait_seconds: waitProperty("ready", 120) }, ["sandbox_id"]),
    run: (args, api) => pauseOrResume(api, args, "resume")
  },
  {
    name: "run_command",
    title: "Run a command",
    description: "Runs a command in a sandbox (argv, not a shell line: use [\"sh\", \"-c\", \"…\"] for one) and waits for it (at most wait_seconds, default 60). `input` is written to its standard input, which is then closed (providers that take input only). Returns its state, exit code, stdout and stderr (each capped at 256 KiB here).",
    inputSchema: (() => {
      const schema = inputSchema(StartProcess, {
        sandbox_id: SANDBOX_ID,
        wait_seconds: waitProperty("the end", 60),
        input: { type: "string", description: "Text for the command's standard input (then closed)" }
      }, ["sandbox_id"])
      // Input is given whole here (`input`), not kept open.
      const { stdin: _, ...properties } = schema.properties as Record<string, unknown>
      return { ...schema, properties }
    })(),
    run: async (args, api) => {
      const { id, rest } = split(args)
      const { wait_seconds, input, stdin: _, ...request } = rest
      const wait = seconds(wait_seconds, 60, 300)
      if (input !== undefined && typeof input !== "string") throw new ToolFailure("validation_error", "input must be a string")
      let process
      if (input === undefined) {
        process = ok(await api("POST", `/v1/sandboxes/${id}/processes?wait_seconds=${wait}`, request), 201, 202)
        // Finished in time: the answer carries the output (unless it was past the answer's cap).
        if (typeof process.stdout === "string" && process.output_capped === false) {
          return text({ process_id: process.id, state: process.state, exit_code: process.exit_code, stdout: capText(process.stdout), stderr: capText(process.stderr), finished: true })
        }
      } else {
        const started = ok(await api("POST", `/v1/sandboxes/${id}/processes`, { ...request, stdin: true }), 202)
        const bytes = Buffer.from(input, "utf8")
        for (let at = 0; at === 0 || at < bytes.length; at += STDIN_PIECE) {
          const last = at + STDIN_PIECE >= bytes.length
          const written = await api("POST", `/v1/sandboxes/${id}/processes/${started.id}/stdin`, { data_base64: bytes.subarray(at, at + STDIN_PIECE).toString("base64"), eof: last })
          // A process that stopped reading (it ended) takes no more: as with a pipe in a shell.
          if (written.status === 409 && written.body?.code === "invalid_process_state") break
          ok(written, 202)
          if (last) break
        }
        process = await waitFor(async () => ok(await api("GET", `/v1/sandboxes/${id}/processes/${started.id}`), 200), (p) => !["queued", "running", "cancelling"].includes(p.state), wait)
      }
      const output = await processOutput(api, id, process.id)
      return text({ process_id: process.id, state: process.state, exit_code: process.exit_code, ...output, finished: process.state !== "running" && process.state !== "queued" })
    }
  },
  {
    name: "read_file",
    title: "Read a file",
    description: "Reads a file of a sandbox (up to limit_bytes from offset_bytes). Text comes back as text; other bytes as base64.",
    inputSchema: inputSchema(ReadFile, { sandbox_id: SANDBOX_ID }, ["sandbox_id"]),
    run: async (args, api) => {
      const { id, rest } = split(args)
      const result = await runtimeOperation(api, id, "read", rest)
      const bytes = Buffer.from(result.data_base64, "base64")
      let decoded: string | undefined
      try {
        decoded = new TextDecoder("utf-8", { fatal: true }).decode(bytes)
      } catch {}
      const { data_base64, ...meta } = result
      return decoded !== undefined
        ? { content: [{ type: "text", text: decoded }], structuredContent: { ...meta, text: decoded } }
        : { content: [{ type: "text", text: `(binary, ${bytes.length} bytes, base64) ${data_base64}` }], structuredContent: result }
    }
  },
  {
    name: "write_file",
    title: "Write a file",
    description: "Writes a file in a sandbox: give `text` (UTF-8) or `data_base64`. mode: create, overwrite (default) or append.",
    inputSchema: (() => {
      const schema = inputSchema(WriteFile, { sandbox_id: SANDBOX_ID, text: { type: "string", description: "The content as UTF-8 text (instead of data_base64)" } }, ["sandbox_id"])
      return { ...schema, required: schema.required.filter((k: string) => k !== "data_base64") }
    })(),
    run: async (args, api) => {
      const { id, rest } = split(args)
      const { text: content, ...request } = rest
      if ((content === undefined) === (request["data_base64"] === undefined)) throw new ToolFailure("validation_error", "give exactly one of text and data_base64")
      if (content !== undefined && typeof content !== "string") throw new ToolFailure("validation_error", "text must be a string")
      const payload = content === undefined ? request : { ...request, data_base64: Buffer.from(content, "utf8").toString("base64") }
      return text(await runtimeOperation(api, id, "write", payload))
    }
  },
  {
    name: "list_directory",
    title: "List a directory",
    description: "Lists a directory of a sandbox (recursive on request).",
    inputSchema: inputSchema(ListFiles, { sandbox_id: SANDBOX_ID }, ["sandbox_id"]),
    run: async (args, api) => {
      const { id, rest } = split(args)
      return text(await runtimeOperation(api, id, "list", rest))
    }
  },
  {
    name: "expose_port",
    title: "Expose a port",
    description: "Serves an HTTP port of the sandbox at a URL (an endpoint with a lease) and waits until it is active.",
    inputSchema: inputSchema(CreateEndpoint, { sandbox_id: SANDBOX_ID }, ["sandbox_id"]),
    run: async (args, api) => {
      const { id, rest } = split(args)
      const created = ok(await api("POST", `/v1/sandboxes/${id}/endpoints`, rest), 202)
      const endpoint = await waitFor(
        async () => (ok(await api("GET", `/v1/sandboxes/${id}/endpoints?limit=100`), 200).endpoints as Array<any>).find((e) => e.id === created.id) ?? created,
        (e) => e.state !== "provisioning",
        60
      )
      if (endpoint.state !== "active") throw new ToolFailure(endpoint.error?.code ?? "endpoint_failed", endpoint.error?.message ?? `The endpoint is ${endpoint.state}`)
      return text(endpoint)
    }
  },
  {
    name: "screenshot",
    title: "Take a screenshot",
    description:
      "A screenshot of the desktop of a sandbox created with features.computer_use (png unless format is jpeg; a region, scale 0.1-1, show_cursor). Returns the image, and where the pointer is.",
    inputSchema: inputSchema(TakeScreenshot, { sandbox_id: SANDBOX_ID }, ["sandbox_id"]),
    run: async (args, api) => {
      const { id, rest } = split(args)
      const result = await runtimeOperation(api, id, "screenshots", rest)
      const { data_base64, ...meta } = result
      return {
        content: [{ type: "image", data: data_base64, mimeType: result.format === "jpeg" ? "image/jpeg" : "image/png" }, { type: "text", text: JSON.stringify(meta) }],
        structuredContent: meta
      }
    }
  },
  {
    name: "computer_action",
    title: "Act on the desktop",
    description:
      "One input action on the desktop of a sandbox created with features.computer_use, by type: mouse_move {x, y}, mouse_click {x, y, button, double}, mouse_drag {start_x, start_y, end_x, end_y, button}, mouse_scroll {direction, amount, x?, y?}, keyboard_type {text, delay_ms}, keyboard_key {key, modifiers}, keyboard_hotkey {keys: \"ctrl+c\"}. Waits until it is done; returns where the pointer is.",
    inputSchema: (() => {
      // The action's own schema is a union; its definitions move up to the root, where its `$ref`s point.
      const { $schema: _, $defs, ...action } = JSONSchema.make(ComputerAction) as unknown as Record<string, unknown> & { $defs?: Record<string, unknown> }
      return { ...inputSchema(undefined, { sandbox_id: SANDBOX_ID, action }, ["sandbox_id", "action"]), ...($defs === undefined ? {} : { $defs }) }
    })(),
    run: async (args, api) => {
      const { id, rest } = split(args)
      const { action, ...unknown } = rest
      if (Object.keys(unknown).length > 0) throw new ToolFailure("validation_error", `unknown argument: ${Object.keys(unknown).join(", ").slice(0, 200)}`)
      return text(await runtimeOperation(api, id, "actions", action))
    }
  },
  {
    name: "destroy_sandbox",
    title: "Destroy a sandbox",
    description: "Destroys a sandbox and waits until it is stopped (at most 60 s).",
    inputSchema: inputSchema(undefined, { sandbox_id: SANDBOX_ID }, ["sandbox_id"]),
    run: async (args, api) => {
      const { id } = split(args)
      return text({ sandbox_id: id, operation: await sandboxAction(api, "DELETE", `/v1/sandboxes/${id}`, 60) })
    }
  }
]

/** A tool's failure as MCP wants it: a result with isError, the envelope's code and message in it. */
export const toolError = (e: unknown): ToolResult => {
  const failure = e instanceof ToolFailure ? e : new ToolFailure("internal_error", "The tool failed unexpectedly")
  const error = { code: failure.code, message: failure.message, ...(failure.details !== undefined ? { details: failure.details } : {}) }
  const details = failure.details === undefined ? "" : ` ${JSON.stringify(failure.details)}`
  return { content: [{ type: "text", text: `${failure.code}: ${failure.message}${details}` }], structuredContent: { error }, isError: true }
}
