/**
 * Sandboxes as the services see them (rows: src/db/repos/Sandboxes.ts; wire form: src/http/wire/Sandboxes.ts).
 * States follow reference/openmetal-api.md §3; a destroyed sandbox is `stopped`, never deleted.
 */
import { type SandboxFilter, SandboxesRepo, type SandboxRow, type SandboxState } from "../../db/repos/Sandboxes.ts"
import type { ProjectId, SandboxId } from "../../domain/Ids.ts"

export type { SandboxRow, SandboxState }

/** States in which the sandbox (may) hold a provider resource and counts as live. */
export const LIVE_STATES: ReadonlyArray<SandboxState> = [
  "requested",
  "routing",
  "provisioning",
  "provision_unknown",
  "ready",
  "pausing",
  "paused",
  "resuming",
  "runtime_unknown",
  "stopping",
  "cleanup_pending"
]

export const getSandboxRow = (id: SandboxId) => SandboxesRepo.get(id)

/** The capability snapshot a sandbox's processes, files and endpoints are answered with (null until it is ready). */
export const sandboxCapabilities = (id: SandboxId) => SandboxesRepo.capabilities(id)

/** A project's sandboxes, newest first, after the (created_at, id) position if given, filtered (SandboxFilter). */
export const sandboxPage = (projectId: ProjectId, after: readonly [string, string] | undefined, limit: number, filter: SandboxFilter) =>
  SandboxesRepo.page(projectId, after, limit, filter)

/** All of a project's sandboxes, newest first (the dashboard's list on the project path). */
export const projectSandboxes = (projectId: ProjectId) => SandboxesRepo.ofProject(projectId)

/** Sets the state (and the timestamp that goes with it) unless the row is already in one of `unless`. */
export const setSandboxState = (
  id: SandboxId,
  state: SandboxState,
  extra: { readonly reason?: string | null; readonly unless?: ReadonlyArray<SandboxState> } = {}
) => SandboxesRepo.setState(id, state, extra)

/** Records API activity on a sandbox (idle timeout bookkeeping). */
export const touchSandbox = (id: SandboxId) => SandboxesRepo.touch(id)
