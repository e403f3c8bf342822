/**
 * The dashboard: who is signed in (the session, GET /v1/sessions/current), the workspace (organization and
 * project, from the path), and the pages. Paths: `/login`; `/o/{organization}/…` for an organization's pages;
 * `/p/{project}/…` for a project's.
 */
import { LocationProvider, Route, Router, useLocation } from "preact-iso/router"
import { useEffect, useState } from "preact/hooks"
import { del, get, whenSignedOut } from "./api.ts"
import { ApiKeys } from "./pages/ApiKeys.tsx"
import { Billing } from "./pages/Billing.tsx"
import { Home } from "./pages/Home.tsx"
import { Login } from "./pages/Login.tsx"
import { Members } from "./pages/Members.tsx"
import { NewSandbox } from "./pages/NewSandbox.tsx"
import { OrganizationPage } from "./pages/Organization.tsx"
import { ProjectSettings } from "./pages/ProjectSettings.tsx"
import { Providers } from "./pages/Providers.tsx"
import { SandboxPage } from "./pages/SandboxPage.tsx"
import { Sandboxes } from "./pages/Sandboxes.tsx"
import { Usage } from "./pages/Usage.tsx"
import { Webhooks } from "./pages/Webhooks.tsx"
import type { SessionW } from "./types.ts"
import { Action, Loading } from "./ui.tsx"
import { useWorkspace, WorkspaceProvider } from "./workspace.tsx"

export const App = () => {
  // undefined: not known yet; null: signed out.
  const [session, setSession] = useState<SessionW | null | undefined>(undefined)
  useEffect(() => {
    whenSignedOut(() => setSession(null))
    get<SessionW>("/v1/sessions/current").then(setSession, () => setSession(null))
  }, [])
  return (
    <LocationProvider>
      <Shell session={session} onSession={setSession} />
    </LocationProvider>
  )
}

const Shell = ({ session, onSession }: { readonly session: SessionW | null | undefined; readonly onSession: (s: SessionW | null) => void }) => {
  const { path, route } = useLocation()
  if (session === undefined) return <main class="page"><Loading what="your session" /></main>
  if (session === null || path === "/login") {
    return <Login onSignedIn={(s) => {
      onSession(s)
      route("/", true)
    }} />
  }
  return (
    <WorkspaceProvider path={path}>
      <Header session={session} onSignedOut={() => {
        onSession(null)
        route("/login", true)
      }} />
      <main class="page" id="main">
        <Router>
          <Route path="/" component={Home} />
          <Route path="/o/:org" component={OrganizationPage} />
          <Route path="/o/:org/members" component={Members} />
          <Route path="/o/:org/billing" component={Billing} />
          <Route path="/o/:org/usage" component={Usage} />
          <Route path="/o/:org/webhooks" component={Webhooks} />
          <Route path="/o/:org/providers" component={Providers} />
          <Route path="/p/:project" component={Sandboxes} />
          <Route path="/p/:project/new" component={NewSandbox} />
          <Route path="/p/:project/sandboxes/:sandbox" component={SandboxPage} />
          <Route path="/p/:project/keys" component={ApiKeys} />
          <Route path="/p/:project/settings" component={ProjectSettings} />
          <Route default component={NotFound} />
        </Router>
      </main>
    </WorkspaceProvider>
  )
}

const NotFound = () => <section><h1>Not found</h1><p>This page does not exist. <a href="/">Back to the dashboard</a>.</p></section>

const Header = ({ session, onSignedOut }: { readonly session: SessionW; readonly onSignedOut: () => void }) => {
  const { organizations, organization, projects, project } = useWorkspace()
  const { route, path } = useLocation()
  const [menu, setMenu] = useState(false)
  const link = (href: string, text: string) => <a href={href} class={path === href ? "current" : undefined} aria-current={path === href ? "page" : undefined}>{text}</a>
  return (
    <header class="top">
      <a class="skip" href="#main">Skip to content</a>
      <div class="bar">
        <a class="brand" href="/">Sandbox Gateway</a>
        <label class="switch">
          <span class="visually-hidden">Organization</span>
          <select aria-label="Organization" value={organization?.id ?? ""} onChange={(e) => route(`/o/${e.currentTarget.value}`)}>
            {organization === undefined && <option value="">Organization…</option>}
            {organizations.map((o) => <option key={o.id} value={o.id}>{o.name}</option>)}
          </select>
        </label>
        {organization !== undefined && (
          <label class="switch">
            <span class="visually-hidden">Project</span>
            <select aria-label="Project" value={project?.id ?? ""} onChange={(e) => route(`/p/${e.currentTarget.value}`)}>
              {project === undefined && <option value="">Project…</option>}
              {projects.map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
            </select>
          </label>
        )}
        <button type="button" class="menu" aria-expanded={menu} aria-controls="nav" onClick={() => setMenu(!menu)}>Menu</button>
        <span class="who">
          <span class="muted">{session.user.email}</span>
          <Action label="Sign out" run={async () => {
            await del("/v1/sessions/current")
            onSignedOut()
          }}>Sign out</Action>
        </span>
      </div>
      <nav id="nav" class={menu ? "nav open" : "nav"} aria-label="Sections" onClick={() => setMenu(false)}>
        {project !== undefined && (
          <>
            {link(`/p/${project.id}`, "Sandboxes")}
            {link(`/p/${project.id}/keys`, "API keys")}
            {link(`/p/${project.id}/settings`, "Project")}
          </>
        )}
        {organization !== undefined && (
          <>
            {link(`/o/${organization.id}`, "Projects")}
            {link(`/o/${organization.id}/members`, "Members")}
            {link(`/o/${organization.id}/billing`, "Billing")}
            {link(`/o/${organization.id}/usage`, "Usage")}
            {link(`/o/${organization.id}/webhooks`, "Webhooks")}
            {link(`/o/${organization.id}/providers`, "Providers")}
          </>
        )}
      </nav>
    </header>
  )
}
