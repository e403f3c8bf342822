/** `/v1/projects/{id}/sandboxes` with a user token: the project's sandboxes for members (owner/admin change them). */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { requireProjectRole } from "../../services/Access.ts"
import { type Caller, destroySandbox, pauseSandbox, resumeSandbox, sandboxOf } from "../../services/sandboxes/Commands.ts"
import { Api } from "../Api.ts"
import { mutationToWire, sandboxToWire } from "../wire/Sandboxes.ts"
import { planeContext } from "./PlaneSupport.ts"

export const ProjectSandboxesLive = HttpApiBuilder.group(Api, "projectSandboxes", (handlers) =>
  Effect.gen(function*() {
    const { runner, provide, tx } = yield* planeContext
    const userCaller = (projectId: string) =>
      Effect.map(requireProjectRole(projectId), (access): Caller => ({ projectId, organizationId: access.organizationId, keyId: null }))
    const done = <E, R>(effect: Effect.Effect<Parameters<typeof mutationToWire>[0], E, R>) =>
      effect.pipe(Effect.map(mutationToWire), Effect.tap(() => runner.wake))

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          yield* userCaller(path.project_id)
          return { sandboxes: (yield* SandboxesRepo.ofProject(path.project_id)).map(sandboxToWire) }
        }).pipe(provide))
      .handle("get", ({ path }) =>
        Effect.flatMap(userCaller(path.project_id), (caller) => Effect.map(sandboxOf(caller, path.sandbox_id), sandboxToWire)).pipe(provide))
      .handle("pause", ({ path }) => done(Effect.flatMap(userCaller(path.project_id), (c) => tx(pauseSandbox(c, path.sandbox_id)))).pipe(provide))
      .handle("resume", ({ path }) => done(Effect.flatMap(userCaller(path.project_id), (c) => tx(resumeSandbox(c, path.sandbox_id)))).pipe(provide))
      .handle("delete", ({ path }) => done(Effect.flatMap(userCaller(path.project_id), (c) => tx(destroySandbox(c, path.sandbox_id)))).pipe(provide))
  }))
