/**
 * A sandbox's processes in the Promise layer: run-and-follow (`exec`, its stdin fed in pieces), terminals started
 * and attached (`terminal`, `shell`), and attaching to a terminal process that already runs or already ended.
 */
import type { Schema } from "effect"
import { ProcessId, type SandboxId } from "../../src/domain/Ids.ts"
import type { Capabilities, Process } from "../../src/domain/Runtime.ts"
import { fromResponse, GatewayError } from "./errors.ts"
import { followEvents } from "./sse.ts"
import { type AttachHandlers, openTerminal, type Terminal, type TerminalExit } from "./terminal.ts"
import { idempotencyKey, namedId, POLL_MS, sleep, type Transport } from "./transport.ts"

export type ProcessRecord = Schema.Schema.Type<typeof Process>

export interface ExecOptions {
  readonly cwd?: string
  readonly env?: Readonly<Record<string, string>>
  readonly timeoutSeconds?: number
  /**
   * Standard input: written to the process as it comes (in pieces of at most 1 MiB), then closed. Needs a
   * provider that takes input (409 capability_unsupported otherwise).
   */
  readonly stdin?: string | Uint8Array | AsyncIterable<Uint8Array>
  /** Each piece of output as it is written (live: the process's event stream is followed). */
  readonly onOutput?: (stream: "stdout" | "stderr", text: string, bytes: Uint8Array) => void
}

export interface AttachOptions extends AttachHandlers {
  /** Replay only the output after this event sequence (default 0: all the output kept). */
  readonly after?: number
}

export interface TerminalOptions extends AttachHandlers {
  /** The terminal's size (default 80×24). */
  readonly cols?: number
  readonly rows?: number
  readonly cwd?: string
  /** The process's environment; `TERM` defaults to xterm-256color. */
  readonly env?: Readonly<Record<string, string>>
  /** Default: an hour, or the provider's longest if shorter. */
  readonly timeoutSeconds?: number
}

export interface ExecResult {
  readonly processId: string
  readonly state: ProcessRecord["state"]
  readonly exitCode: number | null
  readonly stdout: string
  readonly stderr: string
}

const TERMINAL_PROCESS = new Set(["succeeded", "failed", "cancelled", "timed_out"])
const MAX_OUTPUT_BYTES = 10 * 1024 * 1024
/** The longest run-and-wait the API takes (`?wait_seconds`). */
const MAX_WAIT_SECONDS = 300
/** The API takes at most 1 MiB of input a call. */
const STDIN_PIECE = 1024 * 1024
/** A terminal keeps at most this much output (its replay buffer), or the provider's ceiling if lower. */
const TERMINAL_OUTPUT_BYTES = 100 * 1024 * 1024
/** A shell for `shell()`: bash where there is one, else sh; interactive either way. */
const DEFAULT_SHELL = ["/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -i; else exec sh -i; fi"]

/** The processes of sandbox `sandboxId`; `capabilities` is its provider's manifest (asked once, by the handle). */
export const makeProcesses = (t: Transport, sandboxId: SandboxId, capabilities: () => Promise<Schema.Schema.Type<typeof Capabilities>>) => {
  const wsBase = t.baseUrl.replace(/^http/, "ws")
  const getProcess = (processId: ProcessId) => t.call((c) => c.processes.get({ path: { sandbox_id: sandboxId, process_id: processId } }))

  /** Follows a process's event stream to its end, handing over each piece of its output as bytes. */
  const followOutput = (processId: ProcessId, onOutput: (stream: "stdout" | "stderr", bytes: Uint8Array) => void) =>
    followEvents(t.fetch, `${t.baseUrl}/v1/sandboxes/${sandboxId}/processes/${processId}/events?follow=true`, t.authHeaders, (type, data) => {
      if (type !== "stdout" && type !== "stderr") return
      onOutput(type, Uint8Array.from(Buffer.from((data as { data_base64: string }).data_base64, "base64")))
    })

  /** Writes `input` to a process's stdin in ≤ 1 MiB pieces, in order, then closes it; a process that ended stops it. */
  const feed = async (processId: ProcessId, input: string | Uint8Array | AsyncIterable<Uint8Array>) => {
    const write = (bytes: Uint8Array, eof: boolean) =>
      t.call((c) => c.processes.stdin({ path: { sandbox_id: sandboxId, process_id: processId }, payload: { data_base64: Buffer.from(bytes).toString("base64"), eof } }))
    const pieces = typeof input === "string" ? [new TextEncoder().encode(input)] : input instanceof Uint8Array ? [input] : input
    try {
      for await (const piece of pieces) {
        for (let at = 0; at < piece.length; at += STDIN_PIECE) await write(piece.subarray(at, at + STDIN_PIECE), false)
      }
      await write(new Uint8Array(), true)
    } catch (e) {
      // The process stopped reading (it ended): what is left has nowhere to go, as with a pipe in a shell.
      if (!(e instanceof GatewayError && e.code === "invalid_process_state")) throw e
    }
  }

  /**
   * Runs argv (not a shell line: use ["sh", "-c", "…"] for one), follows its output live, and resolves with its
   * exit code and output once it ends.
   */
  const exec = async (command: ReadonlyArray<string>, o: ExecOptions = {}): Promise<ExecResult> => {
    const timeoutSeconds = o.timeoutSeconds ?? 300
    // Nothing to show live and nothing to feed: run and wait, and a process that ends within the wait comes back
    // with its output in the same answer (one call); otherwise (202, or output past the answer's cap) it is read
    // from the events as below.
    const wait = o.onOutput === undefined && o.stdin === undefined ? Math.min(timeoutSeconds, MAX_WAIT_SECONDS) : undefined
    const started = await t.call((c) =>
      c.processes.start({
        path: { sandbox_id: sandboxId },
        urlParams: wait === undefined ? {} : { wait_seconds: wait },
        headers: { "idempotency-key": idempotencyKey() },
        payload: {
          command: [...command],
          ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
          ...(o.env !== undefined ? { environment: { ...o.env } } : {}),
          timeout_seconds: timeoutSeconds,
          max_output_bytes: MAX_OUTPUT_BYTES,
          stdin: o.stdin !== undefined
        }
      }))
    if ("stdout" in started && !started.output_capped) {
      return { processId: started.id, state: started.state, exitCode: started.exit_code, stdout: started.stdout, stderr: started.stderr }
    }
    const feeding = o.stdin === undefined ? Promise.resolve() : feed(started.id, o.stdin)
    const out = { stdout: [] as Array<Uint8Array>, stderr: [] as Array<Uint8Array> }
    const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() }
    await followOutput(started.id, (stream, bytes) => {
      out[stream].push(bytes)
      o.onOutput?.(stream, decoders[stream].decode(bytes, { stream: true }), bytes)
    })
    await feeding
    let process = await getProcess(started.id)
    while (!TERMINAL_PROCESS.has(process.state)) {
      await sleep(POLL_MS)
      process = await getProcess(started.id)
    }
    const text = (chunks: Array<Uint8Array>) => Buffer.concat(chunks).toString("utf8")
    return { processId: process.id, state: process.state, exitCode: process.exit_code, stdout: text(out.stdout), stderr: text(out.stderr) }
  }

  /** A terminal whose process ended before the attach: its stored output is handed over, then its end. */
  const endedTerminal = async (process: ProcessRecord, o: AttachHandlers): Promise<Terminal> => {
    const decoder = new TextDecoder()
    await followOutput(process.id, (_stream, bytes) => o.onOutput?.(decoder.decode(bytes, { stream: true }), bytes))
    const exit: TerminalExit = { state: process.state as TerminalExit["state"], exitCode: process.exit_code }
    o.onExit?.(exit)
    const ended = () => {
      throw new GatewayError("invalid_process_state", `The process is ${process.state}: its terminal is closed`, 409, false)
    }
    return { processId: process.id, write: ended, resize: ended, close: () => undefined, exit: Promise.resolve(exit) }
  }

  /**
   * Attaches to a process started with `pty`: output as it comes (first what was kept after `after`), typed input,
   * resizes. A process that already ended hands over its stored output and resolves `exit` at once.
   */
  const attach = async (processId: string, o: AttachOptions = {}): Promise<Terminal> => {
    const query = o.after === undefined ? "" : `?after=${o.after}`
    const path = `/v1/sandboxes/${sandboxId}/processes/${processId}/attach${query}`
    if (t.webSocket === undefined) {
      throw new GatewayError("client_error", "No WebSocket here to attach a terminal with: pass createClient's `webSocket` (on Node 20, the `ws` package's WebSocket, or run Node with --experimental-websocket)", 0, false)
    }
    let terminal: Terminal
    try {
      terminal = await openTerminal(t.webSocket, `${wsBase}${path}`, t.authHeaders, processId, o)
    } catch (e) {
      // A refused upgrade is unreadable through a WebSocket: the same request without it gets the API's answer.
      const response = await t.fetch(`${t.baseUrl}${path}`, { headers: t.authHeaders }).catch(() => undefined)
      if (response === undefined || response.status === 426) throw e
      const error = await fromResponse(response)
      if (error.code === "invalid_process_state") {
        const process = await getProcess(namedId(ProcessId, processId))
        if (process.pty !== null && TERMINAL_PROCESS.has(process.state)) return endedTerminal(process, o)
      }
      throw error
    }
    // A dropped connection as the process ends is its end: the process says how it ended.
    const exit = terminal.exit.catch(async (e: unknown) => {
      if (e instanceof GatewayError && e.code === "attach_lost") {
        const process = await getProcess(namedId(ProcessId, processId)).catch(() => undefined)
        if (process !== undefined && TERMINAL_PROCESS.has(process.state)) return { state: process.state as TerminalExit["state"], exitCode: process.exit_code }
      }
      throw e
    })
    exit.catch(() => undefined)
    return { ...terminal, exit }
  }

  /** Starts `command` on a terminal (`pty`) and attaches to it; needs a provider with terminals. */
  const terminal = async (command: ReadonlyArray<string>, o: TerminalOptions = {}): Promise<Terminal> => {
    const caps = await capabilities()
    const started = await t.call((c) =>
      c.processes.start({
        path: { sandbox_id: sandboxId },
        urlParams: {},
        headers: { "idempotency-key": idempotencyKey() },
        payload: {
          command: [...command],
          ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
          environment: { TERM: "xterm-256color", ...o.env },
          timeout_seconds: o.timeoutSeconds ?? Math.min(3600, caps.process.max_timeout_seconds || 3600),
          max_output_bytes: Math.min(TERMINAL_OUTPUT_BYTES, caps.process.max_output_bytes || MAX_OUTPUT_BYTES),
          stdin: true,
          pty: { cols: o.cols ?? 80, rows: o.rows ?? 24 }
        }
      }))
    try {
      return await attach(started.id, o)
    } catch (e) {
      // Nobody can type into it: it would only wait for its timeout.
      await t.call((c) => c.processes.cancel({ path: { sandbox_id: sandboxId, process_id: started.id }, headers: {} })).catch(() => undefined)
      throw e
    }
  }

  return {
    exec,
    attach,
    terminal,
    /** An interactive shell (bash where there is one, else sh) on a terminal, attached. */
    shell: (o: TerminalOptions = {}) => terminal(DEFAULT_SHELL, o)
  }
}
