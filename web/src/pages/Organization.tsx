/** `/o/{id}`: the organization's projects (create, rename, delete) and the organization itself (rename, delete). */
import { useLocation } from "preact-iso/router"
import { useState } from "preact/hooks"
import { del, get, newKey, patch, post } from "../api.ts"
import { useWorkspace } from "../workspace.tsx"
import type { OrganizationW, ProjectW } from "../types.ts"
import { Check, Confirm, Field, Form, Show, useLoad, When } from "../ui.tsx"

/** A slug from a name: lowercase letters, digits and single hyphens (what the API's slug pattern takes). */
export const slugOf = (name: string) => name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 56) || "project"
/** An organization's slug is unique across the gateway: the name's, with a short random suffix. */
export const organizationSlugOf = (name: string) => `${slugOf(name)}-${crypto.randomUUID().slice(0, 6)}`

export const OrganizationPage = ({ org }: { readonly org: string }) => {
  const { route } = useLocation()
  const { refresh } = useWorkspace()
  const organization = useLoad(() => get<OrganizationW>(`/v1/organizations/${org}`), [org])
  const projects = useLoad(() => get<{ projects: ReadonlyArray<ProjectW> }>(`/v1/organizations/${org}/projects`), [org])
  const [name, setName] = useState("")
  const [slug, setSlug] = useState("")
  const changed = () => {
    projects.reload()
    refresh()
  }
  return (
    <section>
      <Show load={organization} what="the organization">{(o) => <h1>{o.name} <small class="muted">{o.slug}</small></h1>}</Show>
      <h2>Projects</h2>
      <Show load={projects} what="projects">{({ projects: list }) =>
        list.length === 0 ? <p class="muted">No projects yet.</p> : (
          <table class="table">
            <thead><tr><th scope="col">Name</th><th scope="col">Slug</th><th scope="col">Id</th><th scope="col">Created</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>{list.map((p) => <ProjectRow key={p.id} project={p} onChange={changed} />)}</tbody>
          </table>
        )}
      </Show>
      <h3>New project</h3>
      <Form submit="Create project" label="Create project" class="form inline" onSubmit={async () => {
        const project = await post<ProjectW>(`/v1/organizations/${org}/projects`, { name, slug: slug || slugOf(name) }, { idempotencyKey: newKey() })
        setName("")
        setSlug("")
        changed()
        route(`/p/${project.id}`)
      }}>
        <Field label="Name" value={name} onInput={setName} required />
        <Field label="Slug" value={slug} onInput={setSlug} placeholder={slugOf(name || "my-project")} pattern="[a-z0-9]+(-[a-z0-9]+)*" />
      </Form>
      {/* Keyed by the organization: its form starts from this organization's name and slug, not the last one's. */}
      <Show load={organization} what="the organization">{(o) => <OrganizationSettings key={o.id} organization={o} onChange={() => {
        organization.reload()
        refresh()
      }} onDeleted={() => {
        refresh()
        route("/")
      }} />}</Show>
      <NewOrganization onCreated={(id) => {
        refresh()
        route(`/o/${id}`)
      }} />
    </section>
  )
}

/** Another organization (the first one each user makes gets the welcome credit). */
const NewOrganization = ({ onCreated }: { readonly onCreated: (id: string) => void }) => {
  const [name, setName] = useState("")
  return (
    <>
      <h2>New organization</h2>
      <Form submit="Create organization" label="Create organization" class="form inline" onSubmit={async () => {
        const org = await post<OrganizationW>("/v1/organizations", { name, slug: organizationSlugOf(name) }, { idempotencyKey: newKey() })
        setName("")
        onCreated(org.id)
      }}>
        <Field label="Organization name" value={name} onInput={setName} required />
      </Form>
    </>
  )
}

const ProjectRow = ({ project, onChange }: { readonly project: ProjectW; readonly onChange: () => void }) => {
  const [editing, setEditing] = useState(false)
  const [name, setName] = useState(project.name)
  const [slug, setSlug] = useState(project.slug)
  return (
    <tr>
      <td>{editing ? (
        <Form submit="Save" label={`Rename ${project.name}`} class="form inline" onSubmit={async () => {
          await patch(`/v1/projects/${project.id}`, { name, slug })
          setEditing(false)
          onChange()
        }}>
          <Field label="Name" value={name} onInput={setName} required />
          <Field label="Slug" value={slug} onInput={setSlug} required pattern="[a-z0-9]+(-[a-z0-9]+)*" />
        </Form>
      ) : <a href={`/p/${project.id}`}>{project.name}</a>}</td>
      <td>{project.slug}</td>
      <td><code>{project.id}</code></td>
      <td><When at={project.created_at} /></td>
      <td class="actions">
        <button type="button" onClick={() => setEditing(!editing)}>{editing ? "Cancel" : "Rename"}</button>
        <Confirm title={`Delete project ${project.name}`} button="Delete" confirmText={project.name} run={async () => {
          await del(`/v1/projects/${project.id}`)
          onChange()
        }}>
          <p>Its API keys stop working. A project with live sandboxes cannot be deleted.</p>
        </Confirm>
      </td>
    </tr>
  )
}

const OrganizationSettings = ({ organization, onChange, onDeleted }: { readonly organization: OrganizationW; readonly onChange: () => void; readonly onDeleted: () => void }) => {
  const [name, setName] = useState(organization.name)
  const [slug, setSlug] = useState(organization.slug)
  const [forfeit, setForfeit] = useState(false)
  return (
    <>
      <h2>Organization</h2>
      <Form submit="Save" label="Rename organization" class="form inline" onSubmit={async () => {
        await patch(`/v1/organizations/${organization.id}`, { name, slug })
        onChange()
      }}>
        <Field label="Name" value={name} onInput={setName} required />
        <Field label="Slug" value={slug} onInput={setSlug} required pattern="[a-z0-9]+(-[a-z0-9]+)*" />
      </Form>
      <div class="danger-zone">
        <Confirm title={`Delete organization ${organization.name}`} button="Delete organization" confirmText={organization.name} run={async () => {
          await del(`/v1/organizations/${organization.id}`, { confirm_name: organization.name, confirm_forfeit_balance: forfeit })
          onDeleted()
        }}>
          <p>Only an owner may. Its projects, keys, members and invitations go with it; it must have no live sandboxes.</p>
          <Check label="Forfeit the remaining credit balance" checked={forfeit} onChange={setForfeit} />
        </Confirm>
      </div>
    </>
  )
}
