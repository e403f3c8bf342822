/**
 * Replicas (docs/operations/scaling-out.md): this process is a node (NODE_ID, default the host name) that beats in the
 * `nodes` table every few seconds. Every node also watches the others: one silent for longer than the grace
 * period (NODE_GRACE_SECONDS) is lost — exactly one replica wins `markLost` and then reports each sandbox that
 * lived on it (on its local runtime) `failed` with `state_reason: "node_lost"`, ends their unfinished operations
 * and processes with the code `node_lost`, and fails the jobs pinned to it. Sandboxes on remote providers live on
 * no node, so any replica keeps serving them. On SQLite (one node) nothing is pinned and no node is ever lost.
 */
import { Effect, Layer, Schedule } from "effect"
import { AppConfig, type AppConfigShape, nodeIdOf } from "../Config.ts"
import { provideRepositories } from "../db/Database.ts"
import { inTransaction } from "../db/Db.ts"
import { Dialect } from "../db/Dialect.ts"
import { EndpointsRepo } from "../db/repos/Endpoints.ts"
import { JobsRepo } from "../db/repos/Jobs.ts"
import { NodesRepo } from "../db/repos/Nodes.ts"
import { OperationsRepo } from "../db/repos/Operations.ts"
import { ProcessesRepo } from "../db/repos/Processes.ts"
import { RuntimeOperationsRepo } from "../db/repos/RuntimeOperations.ts"
import { RecordingsRepo } from "../db/repos/Recordings.ts"
import { SandboxesRepo } from "../db/repos/Sandboxes.ts"
import type { ErrorObject } from "../domain/Errors.ts"
import { isoAfter, nowIso } from "../domain/Time.ts"
import { appendEvent } from "./Events.ts"

export const NODE_LOST: ErrorObject = {
  code: "node_lost",
  message: "The gateway node this sandbox lived on stopped responding",
  retryable: false
}

const handleLoss = (nodeId: string) =>
  Effect.gen(function*() {
    const now = yield* nowIso
    for (const sandbox of yield* SandboxesRepo.liveOfNode(nodeId)) {
      yield* Effect.gen(function*() {
        if (!(yield* SandboxesRepo.failNodeLost(sandbox.id, now))) return
        yield* OperationsRepo.failUnfinishedOf(sandbox.id, NODE_LOST, now)
        for (const processId of yield* ProcessesRepo.liveOf(sandbox.id)) yield* ProcessesRepo.finish(processId, "failed", { error: NODE_LOST })
        yield* RuntimeOperationsRepo.failLiveOf(sandbox.id, now)
        yield* RecordingsRepo.failLiveOf(sandbox.id, now)
        yield* EndpointsRepo.revokeLiveOf(sandbox.id, now)
        yield* appendEvent({
          type: "sandbox.failed",
          organizationId: sandbox.organization_id,
          projectId: sandbox.project_id,
          data: { sandbox_id: sandbox.id, provider: sandbox.provider, code: NODE_LOST.code, node_id: nodeId }
        })
      }).pipe(inTransaction)
    }
    const jobs = yield* JobsRepo.failOfNode(nodeId, now)
    yield* Effect.logWarning("a gateway node was lost; its local sandboxes are failed", { node_id: nodeId, jobs })
  })

/** Where the other replicas forward this node's API requests: recorded once the API listens. */
export const recordApiUrl = (config: AppConfigShape, url: string) => Effect.flatMap(nowIso, (now) => NodesRepo.setUrl(nodeIdOf(config), url, now))

/** Where the other replicas forward this node's endpoint traffic: recorded once the endpoint listener listens. */
export const recordEndpointUrl = (config: AppConfigShape, url: string) => Effect.flatMap(nowIso, (now) => NodesRepo.setEndpointUrl(nodeIdOf(config), url, now))

export const NodesLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const provide = yield* provideRepositories
    const id = nodeIdOf(config)
    // NODE_URL, else the API's listening address, recorded by the server once it listens (src/http/Http.ts).
    const url = config.nodeUrl ?? null
    const grace = config.nodeGraceSeconds ?? 60
    const every = Math.max(1, Math.min(5, Math.floor(grace / 4)))
    yield* provide(Effect.flatMap(nowIso, (now) => NodesRepo.register(id, url, now)))
    const beat = provide(Effect.flatMap(nowIso, (now) => NodesRepo.beat(id, now)))
    // SQLite is one node: nothing is ever lost (the heartbeat still shows in /ready).
    const sweep = (yield* Dialect).engine !== "pg" ? Effect.void : provide(Effect.gen(function*() {
      const now = yield* nowIso
      const before = isoAfter(now, -grace)
      for (const node of yield* NodesRepo.silentSince(before)) {
        if (node.id !== id && (yield* NodesRepo.markLost(node.id, before, now))) yield* handleLoss(node.id)
      }
    }))
    yield* Effect.zipRight(beat, sweep).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("node heartbeat failed", cause)),
      Effect.repeat(Schedule.spaced(`${every} seconds`)),
      Effect.forkScoped
    )
  })
)
