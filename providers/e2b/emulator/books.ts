/**
 * The E2B emulator's books: its sandboxes (DATA_DIR/emulators/e2b/state.json, read back through a Schema that
 * also accepts what earlier versions wrote), the open process streams per sandbox (a pause drops them, as it
 * drops real envd connections), and the lifecycle steps every plane uses: kill, pause, resume.
 */
import { Schema } from "effect"
import * as crypto from "node:crypto"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow } from "../../core/emulator/server.ts"
import { emulatorHome, emulatorKey, persistentState } from "../../core/emulator/state.ts"

const ProcessConfig = Schema.mutable(Schema.Struct({
  cmd: Schema.String,
  args: Schema.mutable(Schema.Array(Schema.String)),
  envs: Schema.mutable(Schema.Record({ key: Schema.String, value: Schema.String })),
  cwd: Schema.optional(Schema.String)
}))
export type ProcessConfig = typeof ProcessConfig.Type

const ProcessRecordV2 = Schema.mutable(Schema.Struct({
  execId: Schema.String,
  tag: Schema.NullOr(Schema.String),
  config: ProcessConfig,
  /** Started on a terminal: its output is sent as `pty` data, its input taken as `pty` bytes. */
  pty: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /**
   * Seen to end. envd forgets such a process; the emulator keeps it for `Connect`'s replay, but `List` and the
   * live-process checks skip it without asking the runtime, so a call costs what is running, not every process the
   * sandbox ever ran.
   */
  ended: Schema.optionalWith(Schema.Boolean, { default: () => false })
}))
/** A process as envd knows it; the first version kept only the runtime's exec id per pid. */
const ProcessRecord = Schema.transform(Schema.Union(ProcessRecordV2, Schema.String), Schema.typeSchema(ProcessRecordV2), {
  strict: true,
  decode: (r) => (typeof r === "string" ? { execId: r, tag: null, config: { cmd: "", args: [], envs: {} }, pty: false, ended: false } : r),
  encode: (r) => r
})
export type ProcessRecord = typeof ProcessRecord.Type

const EmulatedSandbox = Schema.mutable(Schema.Struct({
  sandboxID: Schema.String,
  templateID: Schema.String,
  metadata: Schema.mutable(Schema.Record({ key: Schema.String, value: Schema.String })),
  state: Schema.Literal("running", "paused"),
  autoPause: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  allowInternetAccess: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  cpuCount: Schema.Number,
  memoryMB: Schema.Number,
  diskSizeMB: Schema.optionalWith(Schema.Number, { default: () => 0 }),
  accessToken: Schema.String,
  startedAt: Schema.String,
  endAt: Schema.String,
  /** envd pid → the runtime execution */
  processes: Schema.optionalWith(Schema.mutable(Schema.Record({ key: Schema.String, value: ProcessRecord })), { default: () => ({}) })
}))
export type EmulatedSandbox = typeof EmulatedSandbox.Type

const Sandboxes = Schema.mutable(Schema.Record({ key: Schema.String, value: EmulatedSandbox }))

export const makeBooks = (dataDir: string, runtime: LocalRuntimeShape) => {
  const dir = emulatorHome(dataDir, "e2b")
  const apiKey = emulatorKey(dir, () => `e2b_${crypto.randomBytes(20).toString("hex")}`)
  const { state: sandboxes, save } = persistentState(dir, Sandboxes, (): typeof Sandboxes.Type => ({}))
  const streams = new Map<string, Set<(reason: string) => void>>()

  const dropStreams = (sandboxId: string, reason: string) => {
    for (const close of streams.get(sandboxId) ?? []) close(reason)
    streams.delete(sandboxId)
  }
  /** Registers an open stream's closer; returns its removal. */
  const openStream = (sandboxId: string, close: (reason: string) => void) => {
    if (!streams.has(sandboxId)) streams.set(sandboxId, new Set())
    streams.get(sandboxId)!.add(close)
    return () => void streams.get(sandboxId)?.delete(close)
  }
  const kill = async (s: EmulatedSandbox) => {
    dropStreams(s.sandboxID, "the sandbox was killed")
    await runOrThrow(runtime.destroy(s.sandboxID))
    delete sandboxes[s.sandboxID]
    save()
  }
  const pause = async (s: EmulatedSandbox) => {
    await runOrThrow(runtime.pause(s.sandboxID))
    s.state = "paused"
    save()
    dropStreams(s.sandboxID, "the sandbox was paused")
  }
  const resume = async (s: EmulatedSandbox, timeoutSeconds: number) => {
    await runOrThrow(runtime.resume(s.sandboxID))
    s.state = "running"
    s.endAt = new Date(Date.now() + timeoutSeconds * 1000).toISOString()
    save()
  }
  return {
    dir,
    apiKey,
    runtime,
    sandboxes,
    save,
    openStream,
    dropStreams,
    dropAllStreams: (reason: string) => {
      for (const id of [...streams.keys()]) dropStreams(id, reason)
    },
    kill,
    pause,
    resume
  }
}

export type Books = ReturnType<typeof makeBooks>
