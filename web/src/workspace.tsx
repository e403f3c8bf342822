/** The organization and project the page is about (named by its path), and their lists for the switchers. */
import { createContext, type ComponentChildren } from "preact"
import { useContext, useEffect, useState } from "preact/hooks"
import { get } from "./api.ts"
import type { OrganizationW, ProjectW } from "./types.ts"

export interface Workspace {
  readonly organizations: ReadonlyArray<OrganizationW>
  readonly organization: OrganizationW | undefined
  readonly projects: ReadonlyArray<ProjectW>
  readonly project: ProjectW | undefined
  /** Reads the organizations and the current organization's projects again (after a create, rename, delete). */
  readonly refresh: () => void
}

export const WorkspaceContext = createContext<Workspace>({ organizations: [], organization: undefined, projects: [], project: undefined, refresh: () => {} })
export const useWorkspace = () => useContext(WorkspaceContext)

/** The organization and project the path names (a project's path names its organization through the project). */
export const WorkspaceProvider = ({ path, children }: { readonly path: string; readonly children: ComponentChildren }) => {
  const [organizations, setOrganizations] = useState<ReadonlyArray<OrganizationW>>([])
  const [projects, setProjects] = useState<ReadonlyArray<ProjectW>>([])
  const [project, setProject] = useState<ProjectW | undefined>(undefined)
  const [tick, setTick] = useState(0)
  const [, kind, id] = path.split("/")
  const projectId = kind === "p" ? id : undefined
  useEffect(() => {
    get<{ organizations: ReadonlyArray<OrganizationW> }>("/v1/organizations").then((r) => setOrganizations(r.organizations), () => setOrganizations([]))
  }, [tick])
  useEffect(() => {
    if (projectId === undefined) return setProject(undefined)
    get<ProjectW>(`/v1/projects/${projectId}`).then(setProject, () => setProject(undefined))
  }, [projectId, tick])
  const organizationId = kind === "o" ? id : project?.organization_id
  useEffect(() => {
    if (organizationId === undefined) return setProjects([])
    get<{ projects: ReadonlyArray<ProjectW> }>(`/v1/organizations/${organizationId}/projects`).then((r) => setProjects(r.projects), () => setProjects([]))
  }, [organizationId, tick])
  const workspace: Workspace = {
    organizations,
    organization: organizations.find((o) => o.id === organizationId),
    projects,
    project,
    refresh: () => setTick((t) => t + 1)
  }
  return <WorkspaceContext.Provider value={workspace}>{children}</WorkspaceContext.Provider>
}

