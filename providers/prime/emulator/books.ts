/**
 * The Prime emulator's books: sandboxes (terminated ones too, as Prime keeps their records) in
 * DATA_DIR/emulators/prime/state.json, read back through a Schema, so a restarted gateway finds its sandboxes
 * again. Gateway tokens are short-lived and kept in memory only (a restart makes callers ask `/auth` again, as
 * they do for every call).
 */
import { Schema } from "effect"
import * as crypto from "node:crypto"
import { atMostEvery, emulatorHome, emulatorKey, persistentState } from "../../core/emulator/state.ts"

const StringMap = Schema.mutable(Schema.Record({ key: Schema.String, value: Schema.String }))

const Sandbox = Schema.mutable(Schema.Struct({
  /** Also the id of the runtime sandbox behind it. */
  id: Schema.String,
  name: Schema.String,
  status: Schema.String,
  dockerImage: Schema.String,
  cpuCores: Schema.Number,
  memoryGB: Schema.Number,
  diskSizeGB: Schema.Number,
  timeoutMinutes: Schema.Number,
  environmentVars: StringMap,
  labels: Schema.mutable(Schema.Array(Schema.String)),
  teamId: Schema.NullOr(Schema.String),
  idempotencyKey: Schema.NullOr(Schema.String),
  vm: Schema.Boolean,
  createdAt: Schema.String,
  updatedAt: Schema.String,
  startedAt: Schema.NullOr(Schema.String),
  terminatedAt: Schema.NullOr(Schema.String),
  terminationReason: Schema.NullOr(Schema.String),
  errorType: Schema.NullOr(Schema.String),
  errorMessage: Schema.NullOr(Schema.String)
}))
export type Sandbox = typeof Sandbox.Type

const State = Schema.mutable(Schema.Struct({
  sandboxes: Schema.mutable(Schema.Record({ key: Schema.String, value: Sandbox }))
}))

const ENDED_KEPT_MS = 7 * 24 * 3600 * 1000

export const makeBooks = (dataDir: string) => {
  const dir = emulatorHome(dataDir, "prime")
  const apiKey = emulatorKey(dir, () => `pit_${crypto.randomBytes(24).toString("hex")}`)
  const { state, save } = persistentState(dir, State, (): typeof State.Type => ({ sandboxes: {} }))
  return {
    dir,
    apiKey,
    state,
    save,
    /** Terminated sandboxes are forgotten after a week (looked for once a minute). */
    prune: atMostEvery(60_000, (now) => {
      for (const [id, s] of Object.entries(state.sandboxes)) {
        if (s.terminatedAt !== null && now - Date.parse(s.terminatedAt) > ENDED_KEPT_MS) delete state.sandboxes[id]
      }
    })
  }
}

export type Books = ReturnType<typeof makeBooks>

/** Prime's ids are lowercase alphanumerics. */
export const newId = () => crypto.randomBytes(16).toString("hex").slice(0, 25)
