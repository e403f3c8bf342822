/**
 * The Vercel emulator's books: sandboxes (each with its one session: a non-persistent Vercel sandbox never gets
 * a second) in DATA_DIR/emulators/vercel/state.json, and one small file per command — all read back through
 * Schemas, so a restarted gateway finds its sandboxes and commands again. The token, team and project are made
 * once and kept (`api-key`, `team-id`, `project-id` beside the state).
 */
import { Schema } from "effect"
import * as crypto from "node:crypto"
import { atMostEvery, emulatorAccountValue, emulatorHome, emulatorKey, persistentRecords, persistentState } from "../../core/emulator/state.ts"

const StringMap = Schema.mutable(Schema.Record({ key: Schema.String, value: Schema.String }))

const EmulatedSandbox = Schema.mutable(Schema.Struct({
  name: Schema.String,
  projectId: Schema.String,
  /** The runtime sandbox behind its session (a name can be used again after a delete). */
  runtimeId: Schema.String,
  sessionId: Schema.String,
  status: Schema.Literal("running", "stopped", "failed"),
  runtime: Schema.String,
  vcpus: Schema.Number,
  memory: Schema.Number,
  /** ms; extended by extend-timeout. */
  timeout: Schema.Number,
  internet: Schema.Boolean,
  /** The session's working directory when it is not SESSION_CWD: an image's WorkingDir (control.ts sessionCwd). */
  cwd: Schema.optional(Schema.String),
  /** networkPolicy `custom`: only these names (enforced by the runtime's domain policy). */
  allowedDomains: Schema.optional(Schema.Array(Schema.String)),
  env: StringMap,
  tags: StringMap,
  createdAt: Schema.Number,
  startedAt: Schema.Number,
  stoppedAt: Schema.NullOr(Schema.Number),
  /** The usage read last from the runtime (kept when the jail is gone). */
  activeCpuMs: Schema.Number,
  egressBytes: Schema.Number,
  ingressBytes: Schema.Number
}))
export type EmulatedSandbox = typeof EmulatedSandbox.Type

const State = Schema.mutable(Schema.Struct({
  sandboxes: Schema.mutable(Schema.Record({ key: Schema.String, value: EmulatedSandbox }))
}))

/** A command as the session knows it. */
const CommandRecord = Schema.Struct({
  sessionId: Schema.String,
  cmdId: Schema.String,
  runtimeId: Schema.String,
  execId: Schema.String,
  name: Schema.String,
  args: Schema.Array(Schema.String),
  cwd: Schema.String,
  startedAt: Schema.Number,
  /** When the command was first seen over (its duration ends there), and its exit code then. */
  finishedAt: Schema.optional(Schema.Number),
  exitCode: Schema.optional(Schema.Number)
})
export type CommandRecord = typeof CommandRecord.Type

const COMMAND_KEPT_MS = 24 * 3600 * 1000

export const makeBooks = (dataDir: string) => {
  const dir = emulatorHome(dataDir, "vercel")
  const token = emulatorKey(dir, () => `vercel_${crypto.randomBytes(20).toString("hex")}`)
  const { state, save } = persistentState(dir, State, (): typeof State.Type => ({ sandboxes: {} }))
  const commands = persistentRecords(dir, "commands", CommandRecord)
  return {
    dir,
    token,
    teamId: emulatorAccountValue(dir, "team-id", "team_emulated"),
    projectId: emulatorAccountValue(dir, "project-id", "prj_emulated"),
    state,
    save,
    commands,
    commandKey: (sessionId: string, cmdId: string) => `${sessionId}/${cmdId}`,
    bySession: (sessionId: string) => Object.values(state.sandboxes).find((s) => s.sessionId === sessionId),
    /** Old commands are forgotten (looked for once a minute). */
    prune: atMostEvery(60_000, (now) => {
      for (const [key, c] of commands.entries()) if (now - c.startedAt > COMMAND_KEPT_MS) commands.delete(key)
    })
  }
}

export type Books = ReturnType<typeof makeBooks>
