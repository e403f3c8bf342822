/** Recordings as the API shows them (the row's stored duration in ms becomes seconds; the content's URL once stopped). */
import type { RecordingRow } from "../../db/repos/Recordings.ts"
import type { Recording } from "../../domain/Computer.ts"

export const recordingToWire = (row: RecordingRow): typeof Recording.Type => ({
  id: row.id,
  type: "recording" as const,
  project_id: row.project_id,
  sandbox_id: row.sandbox_id,
  state: row.state,
  format: row.format,
  label: row.label,
  byte_length: row.byte_length,
  duration_seconds: row.duration_ms === null ? null : row.duration_ms / 1000,
  content_url: row.state === "stopped" ? `/v1/sandboxes/${row.sandbox_id}/recordings/${row.id}/content` : null,
  error: row.error,
  created_at: row.created_at,
  started_at: row.started_at,
  stopped_at: row.stopped_at,
  updated_at: row.updated_at
})
