/** `/`: to the first project of the first organization; a first organization made here when there is none. */
import { useLocation } from "preact-iso/router"
import { useEffect, useState } from "preact/hooks"
import { get, newKey, post } from "../api.ts"
import { useWorkspace } from "../workspace.tsx"
import type { OrganizationW, ProjectW } from "../types.ts"
import { ErrorBox, Field, Form, Loading } from "../ui.tsx"
import { organizationSlugOf } from "./Organization.tsx"

export const Home = () => {
  const { route } = useLocation()
  const { refresh } = useWorkspace()
  const [none, setNone] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [name, setName] = useState("")
  useEffect(() => {
    get<{ organizations: ReadonlyArray<OrganizationW> }>("/v1/organizations").then(async ({ organizations }) => {
      const first = organizations[0]
      if (first === undefined) return setNone(true)
      const { projects } = await get<{ projects: ReadonlyArray<ProjectW> }>(`/v1/organizations/${first.id}/projects`)
      route(projects[0] === undefined ? `/o/${first.id}` : `/p/${projects[0].id}`, true)
    }).catch(setError)
  }, [])
  if (error !== undefined) return <ErrorBox error={error} />
  if (!none) return <Loading what="your organizations" />
  return (
    <section>
      <h1>Welcome</h1>
      <p>You belong to no organization yet. Make one (its first project follows on the next page).</p>
      <Form submit="Create organization" label="Create organization" onSubmit={async () => {
        const org = await post<OrganizationW>("/v1/organizations", { name, slug: organizationSlugOf(name) }, { idempotencyKey: newKey() })
        refresh()
        route(`/o/${org.id}`)
      }}>
        <Field label="Organization name" value={name} onInput={setName} required />
      </Form>
    </section>
  )
}
