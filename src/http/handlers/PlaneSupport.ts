/**
 * What the sandbox-plane handler groups share: the caller (a project key's, or a member's on the project path),
 * the 202 answer with a Location, list positions, and their context (repositories, idempotency, the runner).
 * Mutations write rows + job in one transaction (the command's, joined by IdempotencyStore's where the route
 * takes a key), start the job at once or wake the runner after commit, and answer 202 with the record to poll.
 *
 * Each runtime group (processes, files, endpoints) is served twice by the same handlers: on `/v1/sandboxes/…` with
 * a project key, and on `/v1/projects/{project_id}/sandboxes/…` with a user's credential (the dashboard's session
 * or a user access token) for any member of the project's organization — the same checks, answers and limits.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect, Schema } from "effect"
import { CurrentProjectKey, CurrentUser } from "../../domain/Principals.ts"
import { requireProjectRole } from "../../services/Access.ts"
import { IdempotencyStore } from "../../services/IdempotencyStore.ts"
import { keyHolder, type StreamHolder, userHolder } from "../../services/LiveStreams.ts"
import { OperationRunner } from "../../services/OperationRunner.ts"
import { serviceContext } from "../../services/ServiceContext.ts"
import type { Caller } from "../../services/sandboxes/SandboxAccess.ts"
import { operationJobKey } from "../../services/sandboxes/LifecycleJobs.ts"
import type { ProjectId } from "../../domain/Ids.ts"

/** Newest-first lists page by (created_at, id); a cursor carrying anything else is a 422. */
export const ListPosition = Schema.Tuple(Schema.String, Schema.String)

/**
 * Who calls a sandbox-plane route: the project and key (null for a member) the services check, the principal an
 * Idempotency-Key is scoped to, where the caller's routes are (the Location of what they create), and the
 * credential a stream it opens is held for (ended when it is revoked or loses access: services/LiveStreams.ts).
 */
export interface PlaneCaller extends Caller {
  readonly principalId: string
  /** `/v1` on the key routes, `/v1/projects/{project_id}` on the project path. */
  readonly base: string
  readonly holder: StreamHolder
}

/** The caller of a key-authenticated route. */
export const keyCaller = Effect.map(CurrentProjectKey, (k): PlaneCaller => ({
  projectId: k.projectId,
  organizationId: k.organizationId,
  keyId: k.keyId,
  principalId: k.keyId,
  base: "/v1",
  holder: keyHolder(k)
}))

/**
 * The caller of a project-path route: a member of the project's organization (else 404, as for no project), its
 * streams held for the user credential that signed the request (a session or a user access token).
 */
export const memberCaller = (projectId: ProjectId) =>
  Effect.zipWith(requireProjectRole(projectId), CurrentUser, (access, user): PlaneCaller => ({
    projectId,
    organizationId: access.organizationId,
    keyId: null,
    principalId: `user:${access.userId}`,
    base: `/v1/projects/${projectId}`,
    holder: userHolder(user, projectId)
  }))

export const accepted = <A, I>(schema: Schema.Schema<A, I>, body: A, location: string) =>
  HttpServerResponse.schemaJson(schema)(body, { status: 202, headers: { location } }).pipe(Effect.orDie)

/** The services' context (provided to each handler), idempotency and the runner. */
export const planeContext = Effect.gen(function*() {
  const idempotency = yield* IdempotencyStore
  const runner = yield* OperationRunner
  const context = yield* serviceContext
  const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, context)
  /**
   * Starts the job behind a sandbox's lifecycle operation at once, in this fiber (falling back to waking the
   * runner): the operation does not wait for the runner's next claim.
   */
  const startNow = (mutation: { readonly operation: Parameters<typeof operationJobKey>[0] }) => runner.runNow(operationJobKey(mutation.operation))
  return { idempotency, runner, provide, startNow }
})
