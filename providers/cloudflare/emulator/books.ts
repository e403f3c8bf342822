/**
 * The bridge emulator's books: its sandboxes (bridge id → the runtime jail behind it, and the idempotency key it
 * was made with) in DATA_DIR/emulators/cloudflare/state.json, read back through a Schema so a restarted gateway
 * finds them again, and the bridge token, made once and kept.
 */
import { Schema } from "effect"
import * as crypto from "node:crypto"
import { emulatorHome, emulatorKey, persistentState } from "../../core/emulator/state.ts"

const EmulatedSandbox = Schema.mutable(Schema.Struct({
  id: Schema.String,
  runtimeId: Schema.String,
  /** The `Idempotency-Key` of its create, if one was sent. */
  key: Schema.NullOr(Schema.String),
  createdAt: Schema.Number
}))
export type EmulatedSandbox = typeof EmulatedSandbox.Type

const State = Schema.mutable(Schema.Struct({
  sandboxes: Schema.mutable(Schema.Record({ key: Schema.String, value: EmulatedSandbox }))
}))

export const makeBooks = (dataDir: string) => {
  const dir = emulatorHome(dataDir, "cloudflare")
  const token = emulatorKey(dir, () => `cfbridge_${crypto.randomBytes(24).toString("base64url")}`)
  const { state, save } = persistentState(dir, State, (): typeof State.Type => ({ sandboxes: {} }))
  return {
    dir,
    token,
    state,
    save,
    byKey: (key: string) => Object.values(state.sandboxes).find((s) => s.key === key)
  }
}

export type Books = ReturnType<typeof makeBooks>
