/**
 * The Daytona emulator's books: sandboxes and signed previews (DATA_DIR/emulators/daytona/state.json), and one
 * small file per session under sessions/ (a session per process: saving one does not rewrite them all) and per
 * PTY session under ptys/, read back through Schemas; sessions of an earlier version's state file are moved to
 * their records at start.
 */
import { Schema } from "effect"
import { atMostEvery, emulatorHome, emulatorKey, persistentRecords, persistentState } from "../../core/emulator/state.ts"

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
  createdAt: Schema.String
}))
export type EmulatedSandbox = typeof EmulatedSandbox.Type

/** A session: command id → runtime exec id. Sessions live until deleted, their sandbox goes, or a day passes. */
const Session = Schema.mutable(Schema.Struct({
  sandboxId: Schema.String,
  createdAt: Schema.optional(Schema.Number),
  commands: Schema.mutable(Schema.Record({ key: Schema.String, value: Schema.mutable(Schema.Struct({ execId: Schema.String, command: Schema.String })) }))
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
  /** Only in state files of earlier versions: moved to the session records at start. */
  sessions: Schema.optional(Schema.mutable(Schema.Record({ key: Schema.String, value: Session }))),
  previews: Schema.mutable(Schema.Record({ key: Schema.String, value: Preview }))
}))

const DAY_MS = 24 * 3600 * 1000

export const makeBooks = (dataDir: string) => {
  const dir = emulatorHome(dataDir, "daytona")
  const apiKey = emulatorKey(dir)
  const { state, save } = persistentState(dir, State, (): typeof State.Type => ({ sandboxes: {}, previews: {} }))
  const sessions = persistentRecords(dir, "sessions", Session)
  /** PTY sessions by `<sandbox id>/<session id>` (each sandbox's daemon has its own). */
  const ptys = persistentRecords(dir, "ptys", PtySession)
  if (state.sessions !== undefined) {
    for (const [id, session] of Object.entries(state.sessions)) sessions.set(id, session)
    delete state.sessions
    save()
  }
  return {
    dir,
    apiKey,
    state,
    save,
    sessions,
    ptys,
    findSandbox: (idOrName: string): EmulatedSandbox | undefined =>
      state.sandboxes[idOrName] ?? Object.values(state.sandboxes).find((s) => s.name === idOrName),
    /** Like the runtime's own retention, sessions older than a day are forgotten (looked for once a minute). */
    pruneSessions: atMostEvery(60_000, (now) => {
      for (const [id, session] of sessions.entries()) if (now - (session.createdAt ?? 0) > DAY_MS) sessions.delete(id)
    })
  }
}

export type Books = ReturnType<typeof makeBooks>
