/**
 * `/p/{id}`: the project's sandboxes, kept live by the project's event stream (each event about a sandbox reads
 * that sandbox again; nothing polls), filtered by state, provider and metadata.
 */
import { useState } from "preact/hooks"
import { get } from "../api.ts"
import { sandboxIdOf, useProjectEvents } from "../events.ts"
import type { SandboxW } from "../types.ts"
import { Badge, Field, Select, Show, useLoad, When } from "../ui.tsx"
import { PROVIDERS } from "../catalog.ts"
import { sourceOf } from "./NewSandbox.tsx"

const STATES = ["requested", "routing", "provisioning", "ready", "pausing", "paused", "resuming", "stopping", "stopped", "failed"]

export const Sandboxes = ({ project }: { readonly project: string }) => {
  const list = useLoad(() => get<{ sandboxes: ReadonlyArray<SandboxW> }>(`/v1/projects/${project}/sandboxes`), [project])
  const [state, setState] = useState("")
  const [provider, setProvider] = useState("")
  const [metadata, setMetadata] = useState("")
  useProjectEvents(project, (event) => {
    const id = sandboxIdOf(event)
    if (id === undefined || !event.type.startsWith("sandbox.")) return
    void get<SandboxW>(`/v1/projects/${project}/sandboxes/${id}`).then((sandbox) => list.update((data) => {
      const current = data?.sandboxes ?? []
      const known = current.some((s) => s.id === id)
      return { sandboxes: known ? current.map((s) => (s.id === id ? sandbox : s)) : [sandbox, ...current] }
    }), () => undefined)
  })
  const [key, value] = metadata.split("=", 2).map((s) => s.trim())
  const shown = (all: ReadonlyArray<SandboxW>) =>
    all.filter((s) =>
      (state === "" || s.state === state) &&
      (provider === "" || s.provider === provider) &&
      (key === undefined || key === "" || (value === undefined ? key in s.metadata : s.metadata[key] === value)))
  return (
    <section>
      <div class="row spread">
        <h1>Sandboxes</h1>
        <a class="button primary" href={`/p/${project}/new`}>New sandbox</a>
      </div>
      <div class="filters" role="search" aria-label="Filter sandboxes">
        <Select label="State" value={state} onChange={setState} options={[["", "Any state"], ...STATES.map((s) => [s, s] as const)]} />
        <Select label="Provider" value={provider} onChange={setProvider} options={[["", "Any provider"], ...PROVIDERS.map((p) => [p, p] as const)]} />
        <Field label="Metadata" value={metadata} onInput={setMetadata} placeholder="key=value" />
      </div>
      <Show load={list} what="sandboxes">{({ sandboxes }) => {
        const rows = shown(sandboxes)
        if (sandboxes.length === 0) return <p class="muted">No sandboxes yet. <a href={`/p/${project}/new`}>Create one</a>.</p>
        if (rows.length === 0) return <p class="muted">No sandbox matches these filters.</p>
        return (
          <table class="table" aria-label="Sandboxes">
            <thead><tr><th scope="col">Sandbox</th><th scope="col">State</th><th scope="col">Provider</th><th scope="col">Source</th><th scope="col">Resources</th><th scope="col">Created</th></tr></thead>
            <tbody>
              {rows.map((s) => (
                <tr key={s.id} data-sandbox={s.id}>
                  <td><a href={`/p/${project}/sandboxes/${s.id}`}><code>{s.id}</code></a>{Object.keys(s.metadata).length > 0 && <div class="muted small">{Object.entries(s.metadata).map(([k, v]) => `${k}=${v}`).join(" · ")}</div>}</td>
                  <td><Badge state={s.state} /></td>
                  <td>{s.provider ?? <span class="muted">choosing…</span>}</td>
                  <td>{sourceOf(s)}</td>
                  <td>{s.requested.resources.vcpu} vCPU · {s.requested.resources.memory_mb} MB</td>
                  <td><When at={s.created_at} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        )
      }}</Show>
    </section>
  )
}
