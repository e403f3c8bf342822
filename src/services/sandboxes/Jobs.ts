/**
 * Registers every job handler with the OperationRunner (the sandbox plane's, and the retention sweep, armed to
 * run at once) and starts it. Built once at start-up, after the provider registry (and so every emulator) is up.
 */
import { Effect, Layer } from "effect"
import { OperationRunner } from "../OperationRunner.ts"
import { makeRetentionHandler, RETENTION_JOB, scheduleRetention } from "../Retention.ts"
import { makeCostSyncHandler } from "./CostSync.ts"
import { makeEndpointHandlers } from "./Endpoints.ts"
import { makeLifecycleHandlers } from "./Lifecycle.ts"
import { makeProcessHandler } from "./Processes.ts"
import { makeRuntimeOperationHandler } from "./RuntimeOperations.ts"
import { makeSpendLimitHandler, SPEND_LIMIT_JOB } from "./SpendLimit.ts"

export const SandboxJobsLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const runner = yield* OperationRunner
    const lifecycle = yield* makeLifecycleHandlers
    const endpoints = yield* makeEndpointHandlers
    yield* runner.register("sandbox.provision", lifecycle.provision)
    yield* runner.register("sandbox.pause", lifecycle.pause)
    yield* runner.register("sandbox.resume", lifecycle.resume)
    yield* runner.register("sandbox.destroy", lifecycle.destroy)
    yield* runner.register("sandbox.runtime_timeout", lifecycle.runtimeTimeout)
    yield* runner.register("sandbox.idle_check", lifecycle.idleCheck)
    yield* runner.register("process.execute", yield* makeProcessHandler)
    yield* runner.register("runtime.filesystem", yield* makeRuntimeOperationHandler)
    yield* runner.register("sandbox.cost_sync", yield* makeCostSyncHandler)
    yield* runner.register("endpoint.create", endpoints.create)
    yield* runner.register("endpoint.revoke", endpoints.revoke)
    yield* runner.register("endpoint.expire", endpoints.expire)
    yield* runner.register(SPEND_LIMIT_JOB, yield* makeSpendLimitHandler)
    yield* runner.register(RETENTION_JOB, yield* makeRetentionHandler)
    yield* scheduleRetention
    yield* runner.start
  })
)
