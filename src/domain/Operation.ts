/**
 * Asynchronous lifecycle operations (spec §2.5, §3; reference §2 "Operations and events", §3 "Operation"): the
 * record a client polls after a 202, and the frames of its finite SSE batches.
 */
import { Schema } from "effect"
import { Timestamp } from "./Accounts.ts"
import { ErrorObject } from "./Errors.ts"
import { OperationId, ProjectId, SandboxId } from "./Ids.ts"

export const OperationType = Schema.Literal("sandbox_create", "sandbox_pause", "sandbox_resume", "sandbox_destroy")
  .annotations({ identifier: "OperationType" })

/** `succeeded`, `failed` and `cancelled` are terminal: the states a client waits for. */
export const OperationState = Schema.Literal("queued", "running", "reconciling", "succeeded", "failed", "cancelled")
  .annotations({ identifier: "OperationState" })

export const Operation = Schema.Struct({
  id: OperationId,
  project_id: ProjectId,
  type: OperationType,
  state: OperationState,
  resource_type: Schema.Literal("sandbox"),
  resource_id: SandboxId,
  retryable: Schema.Boolean,
  error: Schema.NullOr(ErrorObject),
  created_at: Timestamp,
  updated_at: Timestamp,
  completed_at: Schema.NullOr(Timestamp)
}).annotations({ identifier: "Operation" })

// Events (`GET /v1/operations/{id}/events`) ---------------------------------------------------------------------

/** One provider tried during provisioning (reference §9): its index, the provider, and why it was passed over. */
const AttemptData = Schema.Struct({
  attempt_index: Schema.NonNegativeInt,
  provider: Schema.String,
  code: Schema.NullOr(Schema.String),
  unmet_requirements: Schema.Array(Schema.Struct({ requirement: Schema.String, message: Schema.String }))
})

const frame = <T extends string, D extends Schema.Schema.Any>(type: T, data: D) =>
  Schema.Struct({
    sequence: Schema.Int.pipe(Schema.positive()),
    operation_id: OperationId,
    type: Schema.Literal(type),
    occurred_at: Timestamp,
    data
  })

/**
 * The JSON of one frame's `data:` line. Frames read `id: <sequence>` / `event: <type>` / `data: <this>`;
 * sequences start at 1 per operation, so `Last-Event-ID: N` returns every event after N.
 */
export const OperationEventFrame = Schema.Union(
  frame("queued", Schema.Struct({ state: Schema.Literal("queued") })),
  frame("state_changed", Schema.Struct({ state: OperationState, error: Schema.optional(ErrorObject) })),
  frame("completed", Schema.Struct({ state: Schema.Literal("succeeded", "failed", "cancelled"), error: Schema.optional(ErrorObject) })),
  frame("attempt_started", AttemptData),
  frame("attempt_failed", AttemptData),
  // A create from an OCI image on an emulated provider: the pull into this host's layer cache, step by step.
  frame("image_pull", Schema.Union(
    Schema.Struct({ image: Schema.String, phase: Schema.Literal("resolved"), digest: Schema.String, layers: Schema.NonNegativeInt, bytes: Schema.NonNegativeInt }),
    Schema.Struct({ image: Schema.String, phase: Schema.Literal("layer"), digest: Schema.String, cached: Schema.Boolean, bytes: Schema.NonNegativeInt }),
    Schema.Struct({ image: Schema.String, phase: Schema.Literal("done"), digest: Schema.String })
  ))
).annotations({ identifier: "OperationEventFrame" })
export type OperationEventFrame = typeof OperationEventFrame.Type
