/**
 * An operation under way, followed live (`…/operations/{id}/events?follow=true`): its states, each placement
 * attempt, and an image pull's progress (layers fetched or found cached, bytes). When it fails, its error with the
 * reason each provider gave (the eligibility explanation when nothing fits).
 */
import { useEffect, useState } from "preact/hooks"
import { ApiError, follow, get } from "../api.ts"
import type { OperationW } from "../types.ts"
import { Badge, bytes, ErrorBox } from "../ui.tsx"

interface Step {
  readonly type: string
  readonly data: Record<string, unknown>
  readonly at: string
}

const OPERATION_EVENTS = ["queued", "state_changed", "completed", "image_pull", "attempt_started", "attempt_failed"]

const describe = ({ type, data }: Step): string => {
  if (type === "image_pull") {
    if (data["phase"] === "resolved") return `Pulling ${String(data["image"])}: ${String(data["layers"])} layers, ${bytes(Number(data["bytes"]))}`
    if (data["phase"] === "layer") return `Layer ${String(data["digest"]).slice(7, 19)} ${data["cached"] === true ? "found in the cache" : "fetched"} (${bytes(Number(data["bytes"]))})`
    return `Image ${String(data["image"])} pulled`
  }
  if (type === "attempt_started") return `Placed on ${String(data["provider"])}`
  if (type === "attempt_failed") {
    const unmet = data["unmet_requirements"]
    const lacks = Array.isArray(unmet) ? unmet.map((u: { requirement?: unknown }) => String(u.requirement)).join(", ") : ""
    return `${String(data["provider"])} did not take it: ${String(data["code"] ?? "")}${lacks === "" ? "" : ` (lacks ${lacks})`}`
  }
  return `Operation ${String(data["state"] ?? type)}`
}

export const OperationProgress = ({ project, operation, onDone }: { readonly project: string; readonly operation: string; readonly onDone: () => void }) => {
  const [steps, setSteps] = useState<ReadonlyArray<Step>>([])
  const [record, setRecord] = useState<OperationW | undefined>(undefined)
  const path = `/v1/projects/${project}/operations/${operation}`
  useEffect(() => {
    setSteps([])
    setRecord(undefined)
    const stop = follow(`${path}/events?follow=true`, (type, frame) => {
      const { data, occurred_at } = frame as { data: Record<string, unknown>; occurred_at: string }
      setSteps((seen) => [...seen, { type, data, at: occurred_at }])
      if (type === "completed") {
        // The stream ends after this event: stop following (the browser would reconnect), read the result.
        stop()
        get<OperationW>(path).then(setRecord, () => undefined)
        onDone()
      }
    }, OPERATION_EVENTS, () => {
      // The stream ended without its last event: an operation that has ended is read, not followed again.
      get<OperationW>(path).then((op) => {
        if (op.state === "queued" || op.state === "running" || op.state === "reconciling") return
        stop()
        setRecord(op)
      }, () => undefined)
    })
    return stop
  }, [path])
  const failed = record?.error
  return (
    <section class="card progress" aria-live="polite" aria-label="Operation progress">
      <h2>{record === undefined ? "In progress" : "Done"}: <code>{operation}</code> {record !== undefined && <Badge state={record.state} />}</h2>
      <ol class="steps">{steps.map((step, i) => <li key={i}><time dateTime={step.at}>{new Date(step.at).toLocaleTimeString()}</time> {describe(step)}</li>)}</ol>
      {failed !== undefined && failed !== null && (
        <ErrorBox error={new ApiError(0, failed.code, failed.message, undefined, failed.details as Record<string, unknown> | undefined)} />
      )}
    </section>
  )
}
