/**
 * `/o/{id}/providers`: bring your own keys — for each provider, the fields its credentials take (required first;
 * secrets as password fields), which are configured now, and removal — and what each provider can do (its
 * declared capabilities, the table `auto` placement reads).
 */
import { useState } from "preact/hooks"
import { del, get, put } from "../api.ts"
import type { ProviderCredentialW } from "../types.ts"
import { Action, Field, Form, Show, useLoad, When } from "../ui.tsx"
import { catalog, PROVIDERS, type ProviderName } from "../catalog.ts"

const yes = (b: boolean | undefined | null) => (b === true ? "yes" : "—")

export const Providers = ({ org }: { readonly org: string }) => {
  const path = `/v1/organizations/${org}/provider-credentials`
  const configured = useLoad(() => get<{ provider_credentials: ReadonlyArray<ProviderCredentialW> }>(path), [path])
  const [editing, setEditing] = useState<ProviderName | undefined>(undefined)
  return (
    <section>
      <h1>Providers</h1>
      <p class="muted">Without credentials a provider is served by its built-in emulator on this host. With your organization's own credentials (BYOK), its sandboxes run on your account with the provider.</p>
      <Show load={configured} what="credentials">{({ provider_credentials }) => (
        <table class="table" aria-label="Provider credentials">
          <thead><tr><th scope="col">Provider</th><th scope="col">Credentials</th><th scope="col">Fields</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
          <tbody>{PROVIDERS.map((name) => {
            const credential = provider_credentials.find((c) => c.provider === name)
            const fields = catalog.credentialFields[name]
            return (
              <tr key={name}>
                <td>{name}</td>
                <td>{credential === undefined ? <span class="muted">emulated</span> : <>yours, since <When at={credential.updated_at} /></>}</td>
                <td class="small">{[...fields.required, ...fields.optional.map((f) => `${f} (optional)`)].join(", ")}</td>
                <td class="actions">
                  <button type="button" onClick={() => setEditing(editing === name ? undefined : name)}>{credential === undefined ? "Add" : "Replace"}</button>
                  {credential !== undefined && <Action kind="danger" label={`Remove the ${name} credentials`} run={async () => {
                    await del(`${path}/${name}`)
                    configured.reload()
                  }}>Remove</Action>}
                </td>
              </tr>
            )
          })}</tbody>
        </table>
      )}</Show>
      {editing !== undefined && <CredentialForm key={editing} provider={editing} path={path} onSaved={() => {
        setEditing(undefined)
        configured.reload()
      }} />}
      <h2>What each provider can do</h2>
      <div class="scroll">
        <table class="table compact" aria-label="Provider capabilities">
          <thead><tr>
            <th scope="col">Provider</th><th scope="col">Sources</th><th scope="col">Pause</th><th scope="col">Processes</th><th scope="col">Terminal</th>
            <th scope="col">Files</th><th scope="col">Endpoints</th><th scope="col">Internet switch</th><th scope="col">Isolation</th><th scope="col">Architectures</th>
          </tr></thead>
          <tbody>{PROVIDERS.map((name) => {
            const c = catalog.providers[name]
            return (
              <tr key={name}>
                <td>{name}</td>
                <td>{c.sources.join(", ").replaceAll("_", " ")}</td>
                <td>{yes(c.pause && c.resume)}</td>
                <td>{c.process === null ? "—" : `yes${c.process.cancel ? ", cancel" : ""}, ≤ ${c.process.maxTimeoutSeconds} s`}</td>
                <td>{yes(c.process?.terminal)}</td>
                <td>{c.files === null ? "—" : `${c.files.list ? "list, " : ""}≤ ${Math.round(c.files.maxWriteBytes / 1048576)} MiB`}</td>
                <td>{c.httpEndpoints === null ? "—" : `≤ ${c.httpEndpoints.maxLeaseSeconds / 3600} h`}</td>
                <td>{yes(c.network?.blockInternet)}</td>
                <td>{c.isolation ?? "—"}</td>
                <td>{c.architectures.join(", ")}</td>
              </tr>
            )
          })}</tbody>
        </table>
      </div>
    </section>
  )
}

const CredentialForm = ({ provider, path, onSaved }: { readonly provider: ProviderName; readonly path: string; readonly onSaved: () => void }) => {
  const fields = catalog.credentialFields[provider]
  const secrets: ReadonlyArray<string> = fields.secrets
  const [values, setValues] = useState<Record<string, string>>({})
  return (
    <section class="card">
      <h2>{provider} credentials</h2>
      <Form submit="Save credentials" label={`${provider} credentials`} onSubmit={async () => {
        const body = Object.fromEntries(Object.entries(values).filter(([, v]) => v.trim() !== ""))
        await put(`${path}/${provider}`, { provider, ...body })
        onSaved()
      }}>
        {[...fields.required, ...fields.optional].map((field) => (
          <Field key={field} label={`${field}${(fields.optional as ReadonlyArray<string>).includes(field) ? " (optional)" : ""}`} type={secrets.includes(field) ? "password" : "text"}
            value={values[field] ?? ""} onInput={(v) => setValues({ ...values, [field]: v })} required={(fields.required as ReadonlyArray<string>).includes(field)} />
        ))}
      </Form>
    </section>
  )
}
