/**
 * The Runloop emulator's books: devboxes (shut-down ones too, as Runloop keeps listing them, with their usage) in
 * DATA_DIR/emulators/runloop/state.json, and one small file per execution — all read back through Schemas, so a
 * restarted gateway finds its devboxes and executions again.
 */
import { Schema } from "effect"
import * as crypto from "node:crypto"
import { atMostEvery, emulatorHome, emulatorKey, persistentRecords, persistentState } from "../../core/emulator/state.ts"

const StringMap = Schema.mutable(Schema.Record({ key: Schema.String, value: Schema.String }))

const Devbox = Schema.mutable(Schema.Struct({
  /** `dbx_…`; also the id of the runtime sandbox behind it. */
  id: Schema.String,
  name: Schema.NullOr(Schema.String),
  status: Schema.String,
  metadata: StringMap,
  environment: StringMap,
  resourceSize: Schema.String,
  architecture: Schema.String,
  keepAliveSeconds: Schema.Number,
  blueprintId: Schema.NullOr(Schema.String),
  blueprintName: Schema.NullOr(Schema.String),
  createTimeMs: Schema.Number,
  endTimeMs: Schema.NullOr(Schema.Number),
  /** Running time counted so far, and since when it runs now (null while not running): the usage. */
  activeMs: Schema.Number,
  activeSinceMs: Schema.NullOr(Schema.Number),
  /** The running time at the last keep-alive signal (or 0): the keep-alive counts running time from there. */
  keepAliveFromMs: Schema.Number,
  failureReason: Schema.NullOr(Schema.String),
  shutdownReason: Schema.NullOr(Schema.String)
}))
export type Devbox = typeof Devbox.Type

const State = Schema.mutable(Schema.Struct({
  devboxes: Schema.mutable(Schema.Record({ key: Schema.String, value: Devbox }))
}))

const Execution = Schema.mutable(Schema.Struct({
  devboxId: Schema.String,
  executionId: Schema.String,
  /** The local runtime's id of the process. */
  execId: Schema.String,
  command: Schema.String,
  /** The caller's `command_id` (`execute`): the same id again is the same execution. */
  commandId: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  killed: Schema.Boolean,
  createdAt: Schema.String,
  /** How it ended, kept when its devbox is suspended (a frozen jail answers nothing, Runloop still does). */
  final: Schema.optional(Schema.NullOr(Schema.Struct({
    exitStatus: Schema.NullOr(Schema.Number),
    stdout: Schema.String,
    stderr: Schema.String,
    truncated: Schema.Boolean
  })))
}))
export type Execution = typeof Execution.Type

const ENDED_KEPT_MS = 40 * 24 * 3600 * 1000
const EXECUTION_KEPT_MS = 24 * 3600 * 1000

export const makeBooks = (dataDir: string) => {
  const dir = emulatorHome(dataDir, "runloop")
  const apiKey = emulatorKey(dir, () => `ak_${crypto.randomBytes(20).toString("hex")}`)
  const { state, save } = persistentState(dir, State, (): typeof State.Type => ({ devboxes: {} }))
  const executions = persistentRecords(dir, "executions", Execution)
  return {
    dir,
    apiKey,
    state,
    save,
    executions,
    /** Shut-down devboxes and old executions are forgotten (looked for once a minute). */
    prune: atMostEvery(60_000, (now) => {
      for (const [id, d] of Object.entries(state.devboxes)) if (d.endTimeMs !== null && now - d.endTimeMs > ENDED_KEPT_MS) delete state.devboxes[id]
      for (const [key, e] of executions.entries()) if (now - Date.parse(e.createdAt) > EXECUTION_KEPT_MS) executions.delete(key)
    })
  }
}

export type Books = ReturnType<typeof makeBooks>

export const newId = (prefix: string) => `${prefix}_${crypto.randomBytes(15).toString("base64url").replace(/[^A-Za-z0-9]/g, "").slice(0, 20).padEnd(20, "0")}`
