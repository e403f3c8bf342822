/**
 * The Daytona emulator's books: sandboxes and signed previews (DATA_DIR/emulators/daytona/state.json), and one
 * small file per session under shell-sessions/ (saving one does not rewrite them all) and per PTY session under
 * ptys/, read back through Schemas. Sessions of earlier versions (a process per command, no shell) are dropped at
 * start: their processes read as cancelled.
 */
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { emulatorHome, emulatorKey, persistentRecords, persistentState } from "../../core/emulator/state.ts"

const StringMap = Schema.mutable(Schema.Record({ key: Schema.String, value: Schema.String }))

const EmulatedSandbox = Schema.mutable(Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  labels: StringMap,
  /** build_failed: its image could not be pulled (Daytona's state for a failed image build); no jail runs. */
  state: Schema.Literal("started", "stopped", "build_failed"),
  errorReason: Schema.optional(Schema.String),
  /** The OCI image it runs on (`buildInfo.dockerfileContent: "FROM <image>"`), if any. */
  image: Schema.optional(Schema.String),
  cpu: Schema.Number,
  memory: Schema.Number,
  disk: Schema.Number,
  env: StringMap,
  createdAt: Schema.String,
  /** Where its processes start and relative paths resolve (the image's WorkingDir, else /workspace), and $HOME: asked once. */
  workDir: Schema.optional(Schema.String),
  homeDir: Schema.optional(Schema.String)
}))
export type EmulatedSandbox = typeof EmulatedSandbox.Type

/** A command of a session, in the order written to its shell (sessionLog.ts: its markers and directory carry `nonce`). */
const SessionCommand = Schema.mutable(Schema.Struct({
  id: Schema.String,
  command: Schema.String,
  nonce: Schema.String,
  async: Schema.Boolean,
  suppressInputEcho: Schema.Boolean,
  /** Once its output was read to its end: the event that end came in, and where the next command's output starts. */
  toSeq: Schema.optional(Schema.Number),
  nextFromSeq: Schema.optional(Schema.Number),
  /** Once it ended. */
  exitCode: Schema.optional(Schema.Number)
}))
export type SessionCommand = typeof SessionCommand.Type

/** A session: its shell (a runtime execution reading commands on its stdin) and its commands. Kept until deleted or its sandbox goes. */
const Session = Schema.mutable(Schema.Struct({
  sandboxId: Schema.String,
  id: Schema.String,
  createdAt: Schema.Number,
  shellExecId: Schema.String,
  commands: Schema.mutable(Schema.Array(SessionCommand))
}))
export type Session = typeof Session.Type

/** A PTY session (the daemon's PtySessionInfo, plus the runtime exec of its shell once started). */
const PtySession = Schema.mutable(Schema.Struct({
  sandboxId: Schema.String,
  id: Schema.String,
  cwd: Schema.String,
  envs: StringMap,
  cols: Schema.Number,
  rows: Schema.Number,
  createdAt: Schema.String,
  lazyStart: Schema.Boolean,
  execId: Schema.optional(Schema.String)
}))
export type PtySession = typeof PtySession.Type

const Preview = Schema.mutable(Schema.Struct({ sandboxId: Schema.String, port: Schema.Number, expiresAt: Schema.Number }))
export type Preview = typeof Preview.Type

const State = Schema.mutable(Schema.Struct({
  sandboxes: Schema.mutable(Schema.Record({ key: Schema.String, value: EmulatedSandbox })),
  /** Only in state files of earlier versions (sessions without a shell): dropped at start. */
  sessions: Schema.optional(Schema.Unknown),
  previews: Schema.mutable(Schema.Record({ key: Schema.String, value: Preview }))
}))

export const makeBooks = (dataDir: string) => {
  const dir = emulatorHome(dataDir, "daytona")
  const apiKey = emulatorKey(dir)
  const { state, save } = persistentState(dir, State, (): typeof State.Type => ({ sandboxes: {}, previews: {} }))
  /** Sessions by `<sandbox id>/<session id>` (each sandbox's daemon has its own). */
  const sessions = persistentRecords(dir, "shell-sessions", Session)
  /** PTY sessions by `<sandbox id>/<session id>`. */
  const ptys = persistentRecords(dir, "ptys", PtySession)
  if (state.sessions !== undefined) {
    delete state.sessions
    save()
  }
  fs.rmSync(path.join(dir, "sessions"), { recursive: true, force: true })
  return {
    dir,
    apiKey,
    state,
    save,
    sessions,
    ptys,
    findSandbox: (idOrName: string): EmulatedSandbox | undefined =>
      state.sandboxes[idOrName] ?? Object.values(state.sandboxes).find((s) => s.name === idOrName)
  }
}

export type Books = ReturnType<typeof makeBooks>
