/** `/p/{id}/keys`: the project's API keys — create (the key is shown once, with a copy button), revoke, delete. */
import { useState } from "preact/hooks"
import { del, get, post } from "../api.ts"
import type { ApiKeysW, CreatedApiKeyW } from "../types.ts"
import { Action, Badge, CopyButton, Dialog, Field, Form, Select, Show, useLoad, When } from "../ui.tsx"

const EXPIRIES: ReadonlyArray<readonly [string, string]> = [["", "Never"], ["1h", "1 hour"], ["1d", "1 day"], ["7d", "7 days"], ["30d", "30 days"], ["90d", "90 days"], ["180d", "180 days"], ["1y", "1 year"]]

export const ApiKeys = ({ project }: { readonly project: string }) => {
  const keys = useLoad(() => get<ApiKeysW>(`/v1/projects/${project}/api-keys`), [project])
  const [name, setName] = useState("")
  const [expires, setExpires] = useState("")
  const [created, setCreated] = useState<CreatedApiKeyW | undefined>(undefined)
  return (
    <section>
      <h1>API keys</h1>
      <p class="muted">A key (with the header <code>X-Metal-Project-ID: {project}</code>) drives this project's sandboxes through the API.</p>
      <Form submit="Create key" label="Create an API key" class="form inline" onSubmit={async () => {
        setCreated(await post<CreatedApiKeyW>(`/v1/projects/${project}/api-keys`, { name, expires_in: expires === "" ? null : expires }))
        setName("")
        keys.reload()
      }}>
        <Field label="Name" value={name} onInput={setName} required />
        <Select label="Expires" value={expires} onChange={setExpires} options={EXPIRIES} />
      </Form>
      <Dialog title="Your new API key" open={created !== undefined} onClose={() => setCreated(undefined)}>
        <p><strong>Copy it now: it is shown only this once.</strong></p>
        <p><code class="secret" data-secret="api-key">{created?.key}</code> <CopyButton text={created?.key ?? ""} /></p>
      </Dialog>
      <Show load={keys} what="keys">{({ api_keys }) =>
        api_keys.length === 0 ? <p class="muted">No keys yet.</p> : (
          <table class="table" aria-label="API keys">
            <thead><tr><th scope="col">Name</th><th scope="col">Prefix</th><th scope="col">State</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>{api_keys.map((k) => (
              <tr key={k.id}>
                <td>{k.name}</td>
                <td><code>{k.prefix}…</code></td>
                <td><Badge state={k.revoked_at !== null ? "revoked" : k.expires_at !== null && k.expires_at < new Date().toISOString() ? "expired" : "active"} /></td>
                <td><When at={k.created_at} /></td>
                <td><When at={k.last_used_at} /></td>
                <td><When at={k.expires_at} /></td>
                <td class="actions">
                  {k.revoked_at === null
                    ? <Action kind="danger" label={`Revoke ${k.name}`} run={async () => {
                      await post(`/v1/projects/${project}/api-keys/${k.id}/revoke`)
                      keys.reload()
                    }}>Revoke</Action>
                    : <Action kind="danger" label={`Delete ${k.name}`} run={async () => {
                      await del(`/v1/projects/${project}/api-keys/${k.id}`)
                      keys.reload()
                    }}>Delete</Action>}
                </td>
              </tr>
            ))}</tbody>
          </table>
        )}</Show>
    </section>
  )
}
