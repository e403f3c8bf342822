/**
 * The project's live events (`GET /v1/events/stream`, held open by the server, resumed by the browser with
 * Last-Event-ID): how the dashboard learns of state changes without polling.
 */
import { useEffect, useRef } from "preact/hooks"
import { follow } from "./api.ts"
import type { EventW } from "./types.ts"

/** Every event type of docs/guide/webhooks.md: an EventSource hears only the types it names. */
export const EVENT_TYPES = [
  "sandbox.requested", "sandbox.ready", "sandbox.paused", "sandbox.resumed", "sandbox.failed", "sandbox.deleted", "sandbox.cost_updated",
  "sandbox.attempt_started", "sandbox.attempt_failed",
  "process.queued", "process.started", "process.cancel_requested", "process.completed", "process.failed", "process.cancelled",
  "runtime_operation.completed", "runtime_operation.failed",
  "endpoint.created", "endpoint.revoked", "endpoint.expired", "endpoint.failed"
] as const

/** Calls `onEvent` with each event of the project as it is committed, while the component is shown. */
export const useProjectEvents = (projectId: string, onEvent: (event: EventW) => void) => {
  const handler = useRef(onEvent)
  handler.current = onEvent
  useEffect(() => follow(`/v1/events/stream?project_id=${encodeURIComponent(projectId)}`, (_type, data) => {
    if (typeof data === "object" && data !== null) handler.current(data as EventW)
  }, EVENT_TYPES), [projectId])
}

export const sandboxIdOf = (event: EventW) => (typeof event.data["sandbox_id"] === "string" ? event.data["sandbox_id"] : undefined)
