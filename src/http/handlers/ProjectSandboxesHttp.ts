/**
 * `/v1/projects/{id}/sandboxes` with a user's credential: the project's sandboxes for its organization's members
 * (create, extend, capabilities and metrics by the key routes' handlers).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { destroySandbox, pauseSandbox, resumeSandbox } from "../../services/sandboxes/SandboxCommands.ts"
import { sandboxOf } from "../../services/sandboxes/SandboxAccess.ts"
import { projectSandboxes } from "../../services/sandboxes/SandboxRows.ts"
import { Api } from "../Api.ts"
import { mutationToWire, sandboxToWire } from "../wire/Sandboxes.ts"
import { memberCaller, planeContext } from "./PlaneSupport.ts"
import { sandboxHandlers } from "./SandboxesHttp.ts"

export const ProjectSandboxesLive = HttpApiBuilder.group(Api, "projectSandboxes", (handlers) =>
  Effect.gen(function*() {
    const { provide, startNow } = yield* planeContext
    const h = yield* sandboxHandlers
    const done = <E, R>(effect: Effect.Effect<Parameters<typeof mutationToWire>[0], E, R>) =>
      effect.pipe(Effect.map(mutationToWire), Effect.tap(startNow))

    return handlers
      .handle("list", ({ path }) =>
        Effect.gen(function*() {
          yield* memberCaller(path.project_id)
          return { sandboxes: (yield* projectSandboxes(path.project_id)).map(sandboxToWire) }
        }).pipe(provide))
      .handle("create", (request) => Effect.flatMap(memberCaller(request.path.project_id), (caller) => h.create(caller, request)).pipe(provide))
      .handle("extend", (request) => Effect.flatMap(memberCaller(request.path.project_id), (caller) => h.extend(caller, request)).pipe(provide))
      .handle("capabilities", (request) => Effect.flatMap(memberCaller(request.path.project_id), (caller) => h.capabilities(caller, request)).pipe(provide))
      .handle("metrics", (request) => Effect.flatMap(memberCaller(request.path.project_id), (caller) => h.metrics(caller, request)).pipe(provide))
      .handle("get", ({ path }) =>
        Effect.flatMap(memberCaller(path.project_id), (caller) => Effect.map(sandboxOf(caller, path.sandbox_id), sandboxToWire)).pipe(provide))
      .handle("pause", ({ path }) => done(Effect.flatMap(memberCaller(path.project_id), (c) => pauseSandbox(c, path.sandbox_id))).pipe(provide))
      .handle("resume", ({ path }) => done(Effect.flatMap(memberCaller(path.project_id), (c) => resumeSandbox(c, path.sandbox_id))).pipe(provide))
      .handle("delete", ({ path }) => done(Effect.flatMap(memberCaller(path.project_id), (c) => destroySandbox(c, path.sandbox_id))).pipe(provide))
  }))
