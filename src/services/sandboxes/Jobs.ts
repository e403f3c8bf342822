/**
 * The job registry: every job type (its payload Schema: JobTypes.ts, Retention.ts, webhooks/FanOut.ts) with its
 * handler, registered
 * with the OperationRunner, which is then started (with the retention sweep armed to run at once). Built once at
 * start-up, after the provider registry (and so every emulator) is up.
 */
import { Effect, Layer } from "effect"
import { OperationRunner } from "../OperationRunner.ts"
import { makeRetentionHandler, RetentionJob, scheduleRetention } from "../Retention.ts"
import { DELIVERY_CONCURRENCY, makeWebhookDeliveryHandler } from "../webhooks/Delivery.ts"
import { WebhookDeliverJob } from "../webhooks/FanOut.ts"
import { makeComputerHandlers } from "./ComputerJobs.ts"
import { makeCostSyncHandler } from "./CostSync.ts"
import { makeEndpointHandlers } from "./Endpoints.ts"
import * as Jobs from "./JobTypes.ts"
import { makeLifecycleHandlers } from "./Lifecycle.ts"
import { makeProcessHandler } from "./Processes.ts"
import { makeRuntimeOperationHandler } from "./RuntimeOperations.ts"
import { makeSpendLimitHandler } from "./SpendLimit.ts"

export const SandboxJobsLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const runner = yield* OperationRunner
    const lifecycle = yield* makeLifecycleHandlers
    const endpoints = yield* makeEndpointHandlers
    yield* runner.register(Jobs.SandboxProvisionJob, lifecycle.provision)
    yield* runner.register(Jobs.SandboxPauseJob, lifecycle.pause)
    yield* runner.register(Jobs.SandboxResumeJob, lifecycle.resume)
    yield* runner.register(Jobs.SandboxDestroyJob, lifecycle.destroy)
    yield* runner.register(Jobs.RuntimeTimeoutJob, lifecycle.runtimeTimeout)
    yield* runner.register(Jobs.IdleCheckJob, lifecycle.idleCheck)
    yield* runner.register(Jobs.ExtendLifetimeJob, lifecycle.extendLifetime)
    yield* runner.register(Jobs.ProcessExecuteJob, yield* makeProcessHandler)
    yield* runner.register(Jobs.FilesystemJob, yield* makeRuntimeOperationHandler)
    const computer = yield* makeComputerHandlers
    yield* runner.register(Jobs.ComputerActionJob, computer.operation)
    yield* runner.register(Jobs.ComputerScreenshotJob, computer.operation)
    yield* runner.register(Jobs.RecordingStartJob, computer.recordingStart)
    yield* runner.register(Jobs.RecordingStopJob, computer.recordingStop)
    yield* runner.register(Jobs.CostSyncJob, yield* makeCostSyncHandler)
    yield* runner.register(Jobs.EndpointCreateJob, endpoints.create)
    yield* runner.register(Jobs.EndpointRevokeJob, endpoints.revoke)
    yield* runner.register(Jobs.EndpointExpireJob, endpoints.expire)
    yield* runner.register(Jobs.SpendLimitJob, yield* makeSpendLimitHandler)
    yield* runner.register(RetentionJob, yield* makeRetentionHandler)
    // Their own lane: a slow receiver never takes a place sandbox work needs.
    yield* runner.register(WebhookDeliverJob, yield* makeWebhookDeliveryHandler, { concurrency: DELIVERY_CONCURRENCY })
    yield* scheduleRetention
    yield* runner.start
  })
)
