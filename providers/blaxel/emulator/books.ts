/**
 * The Blaxel emulator's books: sandboxes, previews and the usage of every sandbox (for the account's metrics,
 * also after it is deleted) in DATA_DIR/emulators/blaxel/state.json, and one small file per process (a process
 * per exec: saving one does not rewrite them all) — all read back through Schemas, so a restarted gateway finds
 * its sandboxes, processes and previews again. Uploads in progress are kept in memory only. The API key and the
 * workspace are made once and kept (`api-key`, `workspace`).
 */
import { Schema } from "effect"
import * as crypto from "node:crypto"
import { atMostEvery, emulatorAccountValue, emulatorHome, emulatorKey, persistentRecords, persistentState } from "../../core/emulator/state.ts"

const StringMap = Schema.mutable(Schema.Record({ key: Schema.String, value: Schema.String }))

const EmulatedSandbox = Schema.mutable(Schema.Struct({
  name: Schema.String,
  /** The runtime sandbox behind it (a name can be used again after a delete). */
  runtimeId: Schema.String,
  labels: StringMap,
  image: Schema.String,
  /** Where a process without `workingDir` runs: the image's WorkingDir (an image the runtime pulled), else `/`. */
  workingDir: Schema.optional(Schema.String),
  memory: Schema.Number,
  region: Schema.String,
  envs: Schema.mutable(Schema.Array(Schema.Struct({ name: Schema.String, value: Schema.String }))),
  createdAt: Schema.String,
  /** Deleted this long after creation (`spec.runtime.ttl`), if set. */
  ttlSeconds: Schema.NullOr(Schema.Number)
}))
export type EmulatedSandbox = typeof EmulatedSandbox.Type

const Preview = Schema.mutable(Schema.Struct({
  sandbox: Schema.String,
  name: Schema.String,
  port: Schema.Number,
  ttl: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  expiresAt: Schema.Number
}))
export type Preview = typeof Preview.Type

const Usage = Schema.mutable(Schema.Struct({ memory: Schema.Number, createdAt: Schema.String, endedAt: Schema.NullOr(Schema.String) }))

const State = Schema.mutable(Schema.Struct({
  sandboxes: Schema.mutable(Schema.Record({ key: Schema.String, value: EmulatedSandbox })),
  /** By token (the preview URL's secret part). */
  previews: Schema.mutable(Schema.Record({ key: Schema.String, value: Preview })),
  /** By `<name>@<createdAt>`: one entry per sandbox that ever existed, kept 40 days. */
  usage: Schema.mutable(Schema.Record({ key: Schema.String, value: Usage }))
}))

/** A process as the sandbox runtime knows it: its name is the caller's (or its pid). */
const ProcessRecord = Schema.mutable(Schema.Struct({
  runtimeId: Schema.String,
  name: Schema.String,
  pid: Schema.String,
  execId: Schema.String,
  command: Schema.String,
  workingDir: Schema.String,
  startedAt: Schema.String,
  killed: Schema.Boolean,
  /** Ended by `DELETE /process/{id}` (SIGTERM): its status is `stopped`. */
  stopped: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** Started with `stdin: true`: its input is open until closed. */
  stdin: Schema.optionalWith(Schema.Boolean, { default: () => false })
}))
export type ProcessRecord = typeof ProcessRecord.Type

const USAGE_KEPT_MS = 40 * 24 * 3600 * 1000
const PROCESS_KEPT_MS = 24 * 3600 * 1000

export const makeBooks = (dataDir: string) => {
  const dir = emulatorHome(dataDir, "blaxel")
  const apiKey = emulatorKey(dir, () => `bl_${crypto.randomBytes(20).toString("hex")}`)
  const { state, save } = persistentState(dir, State, (): typeof State.Type => ({ sandboxes: {}, previews: {}, usage: {} }))
  const processes = persistentRecords(dir, "processes", ProcessRecord)
  return {
    dir,
    apiKey,
    workspace: emulatorAccountValue(dir, "workspace", "emulated"),
    accountId: "emulated-account",
    state,
    save,
    processes,
    processKey: (runtimeId: string, name: string) => `${runtimeId}/${name}`,
    usageKey: (s: EmulatedSandbox) => `${s.name}@${s.createdAt}`,
    /** Old usage and processes are forgotten (looked for once a minute). */
    prune: atMostEvery(60_000, (now) => {
      for (const [key, u] of Object.entries(state.usage)) if (u.endedAt !== null && now - Date.parse(u.endedAt) > USAGE_KEPT_MS) delete state.usage[key]
      for (const [key, p] of processes.entries()) if (now - Date.parse(p.startedAt) > PROCESS_KEPT_MS) processes.delete(key)
    })
  }
}

export type Books = ReturnType<typeof makeBooks>
