/**
 * A terminal in the sandbox: a shell started on a pseudo-terminal (`pty`), attached over the attach WebSocket on
 * the project path (the session cookie signs the handshake; its Origin is checked). Output arrives as binary
 * frames; keys go out as binary frames; the size follows the panel (a `resize` text frame). Leaving the tab ends
 * the shell.
 */
import { FitAddon } from "@xterm/addon-fit"
import { Terminal } from "@xterm/xterm"
import { useEffect, useRef, useState } from "preact/hooks"
import { newKey, post } from "../api.ts"
import type { ProcessW, SandboxW } from "../types.ts"
import { ErrorBox } from "../ui.tsx"

const SHELL = ["sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash -l || exec sh -l"]

export const TerminalTab = ({ base, sandbox }: { readonly base: string; readonly sandbox: SandboxW }) => {
  const host = useRef<HTMLDivElement>(null)
  const [status, setStatus] = useState("Starting a shell…")
  const [error, setError] = useState<unknown>(undefined)
  useEffect(() => {
    if (sandbox.state !== "ready" || host.current === null) return
    const term = new Terminal({ cursorBlink: true, fontSize: 14, convertEol: false, scrollback: 5000 })
    const fit = new FitAddon()
    term.loadAddon(fit)
    term.open(host.current)
    fit.fit()
    let socket: WebSocket | undefined
    let shell: string | undefined
    let closed = false
    const encoder = new TextEncoder()
    post<ProcessW>(`${base}/processes`, { command: SHELL, pty: { cols: term.cols, rows: term.rows }, timeout_seconds: 3600, environment: { TERM: "xterm-256color" } }, { idempotencyKey: newKey() })
      .then((process) => {
        shell = process.id
        if (closed) return
        const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${base}/processes/${process.id}/attach`
        socket = new WebSocket(url)
        socket.binaryType = "arraybuffer"
        socket.onopen = () => {
          setStatus(`Attached to ${process.id}`)
          term.focus()
        }
        socket.onmessage = (message) => {
          if (typeof message.data === "string") {
            const frame = JSON.parse(message.data) as { type: string; state?: string; exit_code?: number; message?: string }
            setStatus(frame.type === "exit" ? `The shell ended (${frame.state ?? ""}${frame.exit_code === undefined ? "" : ` ${frame.exit_code}`})` : `Error: ${frame.message ?? ""}`)
          } else term.write(new Uint8Array(message.data as ArrayBuffer))
        }
        socket.onclose = (event) => {
          if (!closed) setStatus((s) => (s.startsWith("The shell ended") ? s : `Disconnected (${event.code}${event.reason === "" ? "" : `: ${event.reason}`})`))
        }
        term.onData((data) => socket?.readyState === WebSocket.OPEN && socket.send(encoder.encode(data)))
        term.onResize(({ cols, rows }) => socket?.readyState === WebSocket.OPEN && socket.send(JSON.stringify({ type: "resize", cols, rows })))
      }, setError)
    const resized = new ResizeObserver(() => fit.fit())
    resized.observe(host.current)
    return () => {
      closed = true
      resized.disconnect()
      socket?.close()
      term.dispose()
      // Leaving the tab ends its shell (a closed socket alone would leave it running until its timeout).
      if (shell !== undefined) void post(`${base}/processes/${shell}/actions/cancel`, undefined, { idempotencyKey: newKey() }).catch(() => undefined)
    }
  }, [base, sandbox.state === "ready"])
  if (sandbox.state !== "ready") return <p class="muted">A terminal opens once the sandbox is ready.</p>
  return (
    <div>
      <p class="muted" role="status">{status}</p>
      <ErrorBox error={error} />
      <div ref={host} class="term-host" aria-label="Terminal" />
    </div>
  )
}
