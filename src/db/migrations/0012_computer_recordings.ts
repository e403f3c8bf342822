/**
 * Recordings of sandboxes' desktops (computer use; reference §2 "Runtime"): a resource of their own, starting →
 * recording → stopping → stopped | failed, and the mp4 of a stopped one kept by the gateway in pieces of at most
 * 1 MiB (`recording_chunks`, removed with their recording), so it can be downloaded — with ranges — whatever
 * became of the sandbox.
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  yield* ddl([
    `CREATE TABLE recordings (
      id TEXT PRIMARY KEY,
      project_id TEXT NOT NULL REFERENCES projects(id),
      sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),
      state TEXT NOT NULL,
      format TEXT NOT NULL,
      label TEXT,
      provider_recording_id TEXT,
      byte_length INTEGER,
      duration_ms INTEGER,
      error TEXT,
      created_at TEXT NOT NULL,
      started_at TEXT,
      stopped_at TEXT,
      updated_at TEXT NOT NULL
    )`,
    `CREATE INDEX recordings_sandbox ON recordings(sandbox_id, created_at DESC, id DESC)`,
    `CREATE INDEX recordings_live ON recordings(sandbox_id) WHERE state IN ('starting', 'recording', 'stopping')`,
    `CREATE TABLE recording_chunks (
      recording_id TEXT NOT NULL REFERENCES recordings(id) ON DELETE CASCADE,
      seq INTEGER NOT NULL,
      data BLOB NOT NULL,
      PRIMARY KEY (recording_id, seq)
    )`
  ])
})
