/** `/p/{id}/settings`: rename the project, or delete it (typing its name to confirm). */
import { useLocation } from "preact-iso/router"
import { useEffect, useState } from "preact/hooks"
import { del, get, patch } from "../api.ts"
import { useWorkspace } from "../workspace.tsx"
import type { ProjectW } from "../types.ts"
import { Confirm, Field, Form, Show, useLoad, When } from "../ui.tsx"

export const ProjectSettings = ({ project }: { readonly project: string }) => {
  const { route } = useLocation()
  const { refresh } = useWorkspace()
  const loaded = useLoad(() => get<ProjectW>(`/v1/projects/${project}`), [project])
  const [name, setName] = useState("")
  const [slug, setSlug] = useState("")
  useEffect(() => {
    if (loaded.data === undefined) return
    setName(loaded.data.name)
    setSlug(loaded.data.slug)
  }, [loaded.data])
  return (
    <section>
      <Show load={loaded} what="the project">{(p) => (
        <>
          <h1>{p.name}</h1>
          <p class="muted">Id <code>{p.id}</code> · created <When at={p.created_at} /></p>
          <Form submit="Save" label="Rename the project" class="form inline" onSubmit={async () => {
            const saved = await patch<ProjectW>(`/v1/projects/${project}`, { name, slug })
            loaded.update(() => saved)
            refresh()
          }}>
            <Field label="Name" value={name} onInput={setName} required />
            <Field label="Slug" value={slug} onInput={setSlug} required pattern="[a-z0-9]+(-[a-z0-9]+)*" />
          </Form>
          <div class="danger-zone">
            <Confirm title={`Delete project ${p.name}`} button="Delete project" confirmText={p.name} run={async () => {
              await del(`/v1/projects/${project}`)
              refresh()
              route(`/o/${p.organization_id}`)
            }}>
              <p>Its API keys stop working. A project with live sandboxes cannot be deleted.</p>
            </Confirm>
          </div>
        </>
      )}</Show>
    </section>
  )
}
