/**
 * The sandbox's processes: the latest ones, a command to run (through `sh -c`), and the selected one's output as
 * it is written (its event stream followed live), with cancel while it runs.
 */
import { useEffect, useRef, useState } from "preact/hooks"
import { follow, get, newKey, post } from "../api.ts"
import type { ProcessW, SandboxW } from "../types.ts"
import { Action, Badge, Field, Form, Show, useLoad, When } from "../ui.tsx"

const OUTPUT_EVENTS = ["queued", "started", "stdout", "stderr", "cancel_requested", "exited", "cancelled", "timed_out", "failed"]
const ENDS = ["exited", "cancelled", "timed_out", "failed"]
const RUNNING = ["queued", "running", "cancelling"]

const decode = (base64: string) => new TextDecoder().decode(Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)))

export const Processes = ({ base, sandbox }: { readonly base: string; readonly sandbox: SandboxW }) => {
  const list = useLoad(() => get<{ processes: ReadonlyArray<ProcessW> }>(`${base}/processes`), [base])
  const [selected, setSelected] = useState<string | undefined>(undefined)
  const [command, setCommand] = useState("")
  return (
    <div class="split">
      <div>
        {sandbox.state === "ready" && (
          <Form submit="Run" busy="Starting…" label="Run a command" class="form inline" onSubmit={async () => {
            const started = await post<ProcessW>(`${base}/processes`, { command: ["sh", "-c", command] }, { idempotencyKey: newKey() })
            setSelected(started.id)
            list.reload()
          }}>
            <Field label="Command" value={command} onInput={setCommand} required placeholder="ls -la /workspace" />
          </Form>
        )}
        <Show load={list} what="processes">{({ processes }) =>
          processes.length === 0 ? <p class="muted">No processes yet.</p> : (
            <table class="table compact" aria-label="Processes">
              <thead><tr><th scope="col">Command</th><th scope="col">State</th><th scope="col">Exit</th><th scope="col">Started</th></tr></thead>
              <tbody>{processes.map((p) => (
                <tr key={p.id} class={p.id === selected ? "selected" : undefined}>
                  <td><button type="button" class="link" onClick={() => setSelected(p.id)}><code>{p.command.join(" ").slice(0, 80)}</code></button></td>
                  <td><Badge state={p.state} /></td>
                  <td>{p.exit_code ?? "—"}</td>
                  <td><When at={p.started_at ?? p.created_at} /></td>
                </tr>
              ))}</tbody>
            </table>
          )}</Show>
      </div>
      {selected !== undefined && <Output base={base} processId={selected} onEnd={list.reload} />}
    </div>
  )
}

const Output = ({ base, processId, onEnd }: { readonly base: string; readonly processId: string; readonly onEnd: () => void }) => {
  const [text, setText] = useState("")
  const [state, setState] = useState<string>("running")
  const pre = useRef<HTMLPreElement>(null)
  const path = `${base}/processes/${processId}`
  useEffect(() => {
    setText("")
    setState("running")
    const stop = follow(`${path}/events?follow=true`, (type, frame) => {
      const data = (frame as { data: Record<string, unknown> }).data
      if ((type === "stdout" || type === "stderr") && typeof data["data_base64"] === "string") setText((t) => t + decode(data["data_base64"] as string))
      if (ENDS.includes(type)) {
        stop()
        setState(type === "exited" ? `exited ${String(data["exit_code"] ?? "")}` : type)
        onEnd()
      }
    }, OUTPUT_EVENTS, () => {
      // The stream ended without its last event (kept output expires): a process that has ended is not followed again.
      get<ProcessW>(path).then((p) => {
        if (RUNNING.includes(p.state)) return
        stop()
        setState(p.state)
      }, () => undefined)
    })
    return stop
  }, [path])
  useEffect(() => {
    if (pre.current !== null) pre.current.scrollTop = pre.current.scrollHeight
  }, [text])
  return (
    <div class="output">
      <div class="row spread">
        <h3>Output of <code>{processId}</code> <span class="muted">{state}</span></h3>
        {RUNNING.includes(state) || state === "running" ? <Action run={() => post(`${path}/actions/cancel`, undefined, { idempotencyKey: newKey() })}>Cancel</Action> : null}
      </div>
      <pre ref={pre} class="console" aria-live="polite" aria-label="Process output">{text}</pre>
    </div>
  )
}
