/** The sandbox's endpoints: expose a port under a lease, open its URL, watch the lease run down, revoke it. */
import { useEffect, useState } from "preact/hooks"
import { del, get, newKey, post } from "../api.ts"
import type { EndpointW, EventW, SandboxW } from "../types.ts"
import { Action, Badge, Field, Form, Show, useLoad } from "../ui.tsx"

/** Seconds left until `at`, ticking every second. */
const useCountdown = (at: string) => {
  const [now, setNow] = useState(Date.now())
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000)
    return () => clearInterval(timer)
  }, [])
  return Math.max(0, Math.round((Date.parse(at) - now) / 1000))
}

const Lease = ({ at }: { readonly at: string }) => {
  const left = useCountdown(at)
  const h = Math.floor(left / 3600)
  const m = Math.floor((left % 3600) / 60)
  const s = left % 60
  return <time dateTime={at} title={at} aria-label={`Lease ends in ${left} seconds`}>{h > 0 ? `${h}h ` : ""}{m}m {String(s).padStart(2, "0")}s</time>
}

export const Endpoints = ({ base, sandbox, live }: { readonly base: string; readonly sandbox: SandboxW; readonly live?: ReadonlyArray<EventW> }) => {
  const list = useLoad(() => get<{ endpoints: ReadonlyArray<EndpointW> }>(`${base}/endpoints?limit=100`), [base])
  const [port, setPort] = useState("8000")
  const [lease, setLease] = useState("3600")
  const changes = (live ?? []).filter((e) => e.type.startsWith("endpoint.")).length
  useEffect(() => {
    if (changes > 0) list.reload()
  }, [changes])
  // A new endpoint is provisioning for a moment: read it again until it is active (or failed).
  const pending = list.data?.endpoints.some((e) => e.state === "provisioning" || e.state === "revoking") ?? false
  useEffect(() => {
    if (!pending) return
    const timer = setTimeout(list.reload, 500)
    return () => clearTimeout(timer)
  }, [pending, list.data])
  return (
    <div>
      {sandbox.state === "ready" && (
        <Form submit="Expose" busy="Exposing…" label="Expose a port" class="form inline" onSubmit={async () => {
          await post(`${base}/endpoints`, { port: Number(port), lease_seconds: Number(lease) }, { idempotencyKey: newKey() })
          list.reload()
        }}>
          <Field label="Port" type="number" min="1" max="65535" value={port} onInput={setPort} required />
          <Field label="Lease (seconds)" type="number" min="60" max="86400" value={lease} onInput={setLease} required />
        </Form>
      )}
      <Show load={list} what="endpoints">{({ endpoints }) =>
        endpoints.length === 0 ? <p class="muted">No endpoints.</p> : (
          <table class="table compact" aria-label="Endpoints">
            <thead><tr><th scope="col">Port</th><th scope="col">State</th><th scope="col">URL</th><th scope="col">Lease left</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>{endpoints.map((e) => (
              <tr key={e.id} data-endpoint={e.id}>
                <td>{e.port}</td>
                <td><Badge state={e.state} />{e.error !== null && <span class="muted"> {e.error.message}</span>}</td>
                <td>{e.state === "active" ? <a href={e.url} target="_blank" rel="noopener noreferrer">{e.url}</a> : <span class="muted">{e.url}</span>}</td>
                <td>{e.state === "active" ? <Lease at={e.lease_expires_at} /> : "—"}</td>
                <td class="actions">{(e.state === "active" || e.state === "provisioning") && <Action kind="danger" label={`Revoke port ${e.port}`} run={async () => {
                  await del(`${base}/endpoints/${e.id}`)
                  list.reload()
                }}>Revoke</Action>}</td>
              </tr>
            ))}</tbody>
          </table>
        )}</Show>
    </div>
  )
}
