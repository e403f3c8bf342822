/**
 * `/o/{id}/webhooks`: the organization's webhook endpoints — create (the signing secret is shown once), enable or
 * disable, send a test, rotate the secret, delete — and each one's deliveries: the exact payload, every attempt
 * with the receiver's status and response, redeliver.
 */
import { useState } from "preact/hooks"
import { del, get, patch, post } from "../api.ts"
import type { DeliveryW, WebhookW, WebhookWithSecretW } from "../types.ts"
import { Action, Badge, Confirm, CopyButton, Dialog, Field, Form, Show, useLoad, When } from "../ui.tsx"

export const Webhooks = ({ org }: { readonly org: string }) => {
  const path = `/v1/organizations/${org}/webhooks`
  const hooks = useLoad(() => get<{ webhooks: ReadonlyArray<WebhookW> }>(path), [path])
  const [name, setName] = useState("")
  const [url, setUrl] = useState("")
  const [types, setTypes] = useState("")
  const [secret, setSecret] = useState<string | undefined>(undefined)
  const [open, setOpen] = useState<string | undefined>(undefined)
  return (
    <section>
      <h1>Webhooks</h1>
      <Form submit="Add endpoint" label="Add a webhook endpoint" class="form inline" onSubmit={async () => {
        const created = await post<WebhookWithSecretW>(path, { name, url, event_types: types.split(/[\s,]+/).filter((t) => t !== "") })
        setSecret(created.secret)
        setName("")
        setUrl("")
        hooks.reload()
      }}>
        <Field label="Name" value={name} onInput={setName} required />
        <Field label="URL" type="url" value={url} onInput={setUrl} required placeholder="https://example.com/hooks" />
        <Field label="Event types (empty: all)" value={types} onInput={setTypes} placeholder="sandbox.ready, process.completed" />
      </Form>
      <Dialog title="Signing secret" open={secret !== undefined} onClose={() => setSecret(undefined)}>
        <p><strong>Copy it now: it is shown only this once.</strong> Deliveries are signed with it.</p>
        <p><code class="secret">{secret}</code> <CopyButton text={secret ?? ""} /></p>
      </Dialog>
      <Show load={hooks} what="webhooks">{({ webhooks }) =>
        webhooks.length === 0 ? <p class="muted">No webhook endpoints.</p> : (
          <ul class="cards">{webhooks.map((w) => (
            <li key={w.id} class="card" data-webhook={w.id}>
              <div class="row spread">
                <h2>{w.name} <Badge state={w.enabled ? "active" : "disabled"} /></h2>
                <div class="row actions">
                  <Action run={async () => {
                    await post(`${path}/${w.id}/test`)
                    setOpen(w.id)
                    hooks.reload()
                  }}>Send test</Action>
                  <Action run={async () => {
                    await patch(`${path}/${w.id}`, { enabled: !w.enabled })
                    hooks.reload()
                  }}>{w.enabled ? "Disable" : "Enable"}</Action>
                  <Action run={async () => setSecret((await post<WebhookWithSecretW>(`${path}/${w.id}/rotate`)).secret)}>Rotate secret</Action>
                  <Confirm title={`Delete webhook ${w.name}`} button="Delete" confirmText={w.name} run={async () => {
                    await del(`${path}/${w.id}`)
                    hooks.reload()
                  }} />
                </div>
              </div>
              <p><code>{w.url}</code></p>
              <p class="muted">
                {w.event_types.length === 0 ? "every event" : w.event_types.join(", ")} · secret {w.secret_prefix}…
                {w.last_delivery_at !== null && <> · last delivery <When at={w.last_delivery_at} /> ({w.last_delivery_status})</>}
                {w.disabled_reason !== null && <> · disabled: {w.disabled_reason}</>}
              </p>
              <button type="button" aria-expanded={open === w.id} onClick={() => setOpen(open === w.id ? undefined : w.id)}>{open === w.id ? "Hide deliveries" : "Deliveries"}</button>
              {open === w.id && <Deliveries path={`${path}/${w.id}`} />}
            </li>
          ))}</ul>
        )}</Show>
    </section>
  )
}

const Deliveries = ({ path }: { readonly path: string }) => {
  const list = useLoad(() => get<{ deliveries: ReadonlyArray<DeliveryW> }>(`${path}/deliveries?limit=50`), [path])
  return (
    <div class="deliveries">
      <button type="button" onClick={list.reload}>Refresh</button>
      <Show load={list} what="deliveries">{({ deliveries }) =>
        deliveries.length === 0 ? <p class="muted">No deliveries yet.</p> : (
          <ul class="log" aria-label="Deliveries">{deliveries.map((d) => (
            <li key={d.id} data-delivery={d.id}>
              <details>
                <summary><Badge state={d.status} /> <strong>{d.event_type}</strong>{d.is_test && " (test)"} · <When at={d.created_at} /> · {d.attempt_count} attempt{d.attempt_count === 1 ? "" : "s"}{d.last_http_status !== null && ` · HTTP ${d.last_http_status}`}</summary>
                <h4>Payload</h4>
                <pre class="console">{pretty(d.payload)}</pre>
                {d.attempts.map((a) => (
                  <div key={a.number} class="attempt">
                    <h4>Attempt {a.number} · <When at={a.started_at} /> · {a.http_status === null ? `no response (${a.error ?? ""})` : `HTTP ${a.http_status}`} · {a.latency_ms} ms</h4>
                    {a.response_snippet !== null && <pre class="console">{a.response_snippet}</pre>}
                  </div>
                ))}
                <Action run={async () => {
                  await post(`${path}/deliveries/${d.id}/redeliver`)
                  list.reload()
                }}>Redeliver</Action>
              </details>
            </li>
          ))}</ul>
        )}</Show>
    </div>
  )
}

const pretty = (body: string) => {
  try {
    return JSON.stringify(JSON.parse(body), null, 2)
  } catch {
    return body
  }
}
