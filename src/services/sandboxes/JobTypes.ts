/** The sandbox plane's job types and their payloads (handlers: Jobs.ts registers one per type). */
import { Schema } from "effect"
import { EndpointId, OperationId, OrganizationId, ProcessId, RecordingId, RuntimeOperationId, SandboxId } from "../../domain/Ids.ts"
import { defineJob } from "../JobRegistry.ts"

/** A lifecycle job carries out one operation on one sandbox. */
export const LifecyclePayload = Schema.Struct({ sandbox_id: SandboxId, operation_id: OperationId })
export type LifecyclePayload = typeof LifecyclePayload.Type
const SandboxRef = Schema.Struct({ sandbox_id: SandboxId })
const EndpointRef = Schema.Struct({ endpoint_id: EndpointId })

export const SandboxProvisionJob = defineJob("sandbox.provision", LifecyclePayload)
export const SandboxPauseJob = defineJob("sandbox.pause", LifecyclePayload)
export const SandboxResumeJob = defineJob("sandbox.resume", LifecyclePayload)
export const SandboxDestroyJob = defineJob("sandbox.destroy", LifecyclePayload)
export const RuntimeTimeoutJob = defineJob("sandbox.runtime_timeout", SandboxRef)
export const IdleCheckJob = defineJob("sandbox.idle_check", SandboxRef)
export const CostSyncJob = defineJob("sandbox.cost_sync", SandboxRef)
/** Moves the provider's own lifetime of a sandbox (E2B's timeout) after its runtime deadline was extended. */
export const ExtendLifetimeJob = defineJob("sandbox.extend_lifetime", Schema.Struct({ sandbox_id: SandboxId, seconds: Schema.Int.pipe(Schema.positive()) }))
export const ProcessExecuteJob = defineJob("process.execute", Schema.Struct({ process_id: ProcessId }))
export const FilesystemJob = defineJob("runtime.filesystem", Schema.Struct({ runtime_operation_id: RuntimeOperationId }))
/** Computer use (Computer.ts): an action or a screenshot (runtime operations), a recording's start and stop. */
export const ComputerActionJob = defineJob("computer.action", Schema.Struct({ runtime_operation_id: RuntimeOperationId }))
export const ComputerScreenshotJob = defineJob("computer.screenshot", Schema.Struct({ runtime_operation_id: RuntimeOperationId }))
export const RecordingStartJob = defineJob("recording.start", Schema.Struct({ recording_id: RecordingId }))
export const RecordingStopJob = defineJob("recording.stop", Schema.Struct({ recording_id: RecordingId }))
export const EndpointCreateJob = defineJob("endpoint.create", EndpointRef)
export const EndpointRevokeJob = defineJob("endpoint.revoke", EndpointRef)
export const EndpointExpireJob = defineJob("endpoint.expire", EndpointRef)
export const SpendLimitJob = defineJob("billing.spend_limit.enforce", Schema.Struct({ organization_id: OrganizationId }))
