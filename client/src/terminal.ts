/**
 * A terminal session over `GET …/processes/{id}/attach` (a WebSocket): output arrives as binary frames, typed
 * input leaves as binary frames (at most 1 MiB each), a resize as a text frame, and the process's end as a text
 * frame `{"type":"exit","state","exit_code"}` followed by a normal close. Closing the session leaves the process
 * running; another attach takes the process over (this one is then closed with 4000).
 */
import { GatewayError } from "./errors.ts"

/** How a terminal process ended. */
export interface TerminalExit {
  readonly state: "succeeded" | "failed" | "cancelled" | "timed_out"
  readonly exitCode: number | null
}

export interface AttachHandlers {
  /** Each piece of terminal output as it arrives: raw bytes (what a terminal would be given) and as text. */
  readonly onOutput?: (text: string, bytes: Uint8Array) => void
  /** The process ended (before `exit` resolves). */
  readonly onExit?: (exit: TerminalExit) => void
  /** The gateway could not apply a frame this session sent (an error frame): its code and message. */
  readonly onError?: (error: GatewayError) => void
}

/** An open terminal: type into it, resize it, leave it; `exit` resolves when its process ends. */
export interface Terminal {
  readonly processId: string
  /** Types bytes (or UTF-8 text) into the terminal. Sent in order; what is written before the socket opens waits. */
  readonly write: (data: string | Uint8Array) => void
  /** Resizes the terminal (1–1000 each way); the program sees SIGWINCH. */
  readonly resize: (cols: number, rows: number) => void
  /** Leaves the terminal: the process goes on (attach again to come back). `exit` then rejects with `attach_closed`. */
  readonly close: () => void
  /**
   * The process's end. Rejects with a GatewayError when the session ends first: `attach_closed` (close()),
   * `attach_taken_over` (another attach took the process), `attach_lost` (the connection dropped; retryable), or
   * the gateway's `unauthenticated` / `forbidden` when the key was revoked or expired or its project deleted.
   */
  readonly exit: Promise<TerminalExit>
}

/** The WebSocket constructor to use: Bun's and Node's (undici) global one both take `{ headers }`. */
export type WebSocketConstructor = new (url: string, init: { readonly headers: Record<string, string> }) => WebSocket

/** The gateway's own close codes (Terminals.ts, Attach.ts). */
const TAKEN_OVER = 4000
const ACCESS_ENDED = 4001
const MAX_INPUT_FRAME = 1024 * 1024
/** readyState values (RFC 6455's API): numbers, so a constructor passed in works where no global WebSocket is (Node 20). */
const CONNECTING = 0
const OPEN = 1

type ServerFrame =
  | { readonly type: "exit"; readonly state: TerminalExit["state"]; readonly exit_code: number | null }
  | { readonly type: "error"; readonly code: string; readonly message: string }

const parseFrame = (text: string): ServerFrame | undefined => {
  try {
    const frame = JSON.parse(text) as { type?: unknown }
    return frame.type === "exit" || frame.type === "error" ? (frame as ServerFrame) : undefined
  } catch {
    return undefined
  }
}

/**
 * Opens the WebSocket. Resolves once it is open with the session; rejects with `attach_refused` when it could
 * not be opened (the caller asks the API why: a refused upgrade carries no readable answer in a WebSocket).
 */
export const openTerminal = (
  WebSocketImpl: WebSocketConstructor,
  url: string,
  headers: Record<string, string>,
  processId: string,
  handlers: AttachHandlers
): Promise<Terminal> =>
  new Promise<Terminal>((resolveOpen, rejectOpen) => {
    const ws = new WebSocketImpl(url, { headers })
    ws.binaryType = "arraybuffer"
    const decoder = new TextDecoder()
    let opened = false
    let closedByUs = false
    let exited: TerminalExit | undefined
    let lastError: { readonly code: string; readonly message: string } | undefined
    let settleExit!: { resolve: (exit: TerminalExit) => void; reject: (error: GatewayError) => void }
    const exit = new Promise<TerminalExit>((resolve, reject) => (settleExit = { resolve, reject }))
    // A caller that never awaits `exit` (it closed the session, say) must not get an unhandled rejection.
    exit.catch(() => undefined)
    const pending: Array<Uint8Array<ArrayBuffer> | string> = []

    const send = (frame: Uint8Array<ArrayBuffer> | string) => {
      if (ws.readyState === OPEN) ws.send(frame)
      else if (ws.readyState === CONNECTING) pending.push(frame)
      else throw new GatewayError("attach_closed", "The terminal session is closed", 0, false)
    }

    ws.onopen = () => {
      opened = true
      for (const frame of pending.splice(0)) ws.send(frame)
      resolveOpen({
        processId,
        write: (data) => {
          const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data
          for (let at = 0; at < bytes.length; at += MAX_INPUT_FRAME) send(bytes.slice(at, at + MAX_INPUT_FRAME))
        },
        resize: (cols, rows) => send(JSON.stringify({ type: "resize", cols, rows })),
        close: () => {
          closedByUs = true
          if (ws.readyState === OPEN || ws.readyState === CONNECTING) ws.close(1000, "detached")
        },
        exit
      })
    }
    ws.onmessage = (event: MessageEvent) => {
      if (typeof event.data === "string") {
        const frame = parseFrame(event.data)
        if (frame?.type === "exit") {
          exited = { state: frame.state, exitCode: frame.exit_code }
          handlers.onExit?.(exited)
        } else if (frame?.type === "error") {
          lastError = frame
          handlers.onError?.(new GatewayError(frame.code, frame.message, 0, false))
        }
        return
      }
      const bytes = new Uint8Array(event.data as ArrayBuffer)
      handlers.onOutput?.(decoder.decode(bytes, { stream: true }), bytes)
    }
    ws.onerror = () => {
      if (!opened) rejectOpen(new GatewayError("attach_refused", "The terminal could not be attached", 0, true))
    }
    ws.onclose = (event: CloseEvent) => {
      if (!opened) {
        rejectOpen(new GatewayError("attach_refused", "The terminal could not be attached", 0, true))
        return
      }
      if (exited !== undefined) settleExit.resolve(exited)
      else if (closedByUs) settleExit.reject(new GatewayError("attach_closed", "The terminal session was closed; the process goes on", 0, false))
      else if (event.code === TAKEN_OVER) settleExit.reject(new GatewayError("attach_taken_over", "Another attach took the terminal over", 0, false))
      // The credential may no longer attach: its error frame says why (the process goes on).
      else if (event.code === ACCESS_ENDED) settleExit.reject(new GatewayError(lastError?.code ?? "unauthenticated", lastError?.message ?? `The terminal was closed (${event.reason})`, 0, false, { close_code: event.code, reason: event.reason }))
      else settleExit.reject(new GatewayError("attach_lost", `The terminal connection dropped (${event.code}${event.reason === "" ? "" : ` ${event.reason}`})`, 0, true, { close_code: event.code }))
    }
  })
