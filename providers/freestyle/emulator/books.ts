/**
 * The Freestyle emulator's books: VMs (deleted ones too, as Freestyle keeps their records) in
 * DATA_DIR/emulators/freestyle/state.json, read back through a Schema, so a restarted gateway finds its VMs again.
 * The API key is made once and kept. A VM's id is also the id of the local-runtime jail behind it.
 */
import { Schema } from "effect"
import * as crypto from "node:crypto"
import { atMostEvery, emulatorHome, emulatorKey, persistentState } from "../../core/emulator/state.ts"

const StringMap = Schema.mutable(Schema.Record({ key: Schema.String, value: Schema.String }))

/** Freestyle's VM states; books written before its current API may hold the older names, read as these. */
export const VM_STATES = ["starting", "running", "pausing", "paused", "stopped"] as const
const OLDER_STATES: Readonly<Record<string, (typeof VM_STATES)[number]>> = { building: "starting", suspending: "pausing", suspended: "paused", lost: "stopped" }
const VmStateRead = Schema.transform(
  Schema.Literal(...VM_STATES, ...(Object.keys(OLDER_STATES) as Array<"building" | "suspending" | "suspended" | "lost">)),
  Schema.Literal(...VM_STATES),
  { strict: true, decode: (s) => OLDER_STATES[s] ?? (s as (typeof VM_STATES)[number]), encode: (s) => s }
)

const Vm = Schema.mutable(Schema.Struct({
  id: Schema.String,
  /** Its slug (Freestyle's name for a VM, unique among the live ones). */
  name: Schema.NullOr(Schema.String),
  displayName: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  state: VmStateRead,
  /** Whether its firewall lets it reach the public internet (else it has no network beyond itself). */
  internet: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  updatedAtMs: Schema.optionalWith(Schema.Number, { default: () => 0 }),
  snapshotId: Schema.String,
  metadata: StringMap,
  vcpuCount: Schema.Number,
  memSizeGb: Schema.Number,
  rootfsSizeGb: Schema.Number,
  createdAtMs: Schema.Number,
  ttlSeconds: Schema.NullOr(Schema.Number),
  maxRunSeconds: Schema.NullOr(Schema.Number),
  idleTimeoutSeconds: Schema.NullOr(Schema.Number),
  /** Running time counted so far, and since when it runs now (null while not running). */
  runMs: Schema.Number,
  runningSinceMs: Schema.NullOr(Schema.Number),
  deleted: Schema.Boolean,
  deletedAtMs: Schema.NullOr(Schema.Number)
}))
export type Vm = typeof Vm.Type

const State = Schema.mutable(Schema.Struct({ vms: Schema.mutable(Schema.Record({ key: Schema.String, value: Vm })) }))

const DELETED_KEPT_MS = 7 * 24 * 3600 * 1000

export const makeBooks = (dataDir: string) => {
  const dir = emulatorHome(dataDir, "freestyle")
  const apiKey = emulatorKey(dir, () => `fs_${crypto.randomBytes(20).toString("hex")}`)
  const { state, save } = persistentState(dir, State, (): typeof State.Type => ({ vms: {} }))
  return {
    dir,
    apiKey,
    state,
    save,
    /** Deleted VMs are forgotten after a week (looked for once a minute). */
    prune: atMostEvery(60_000, (now) => {
      for (const [id, vm] of Object.entries(state.vms)) if (vm.deletedAtMs !== null && now - vm.deletedAtMs > DELETED_KEPT_MS) delete state.vms[id]
    })
  }
}

export type Books = ReturnType<typeof makeBooks>

export const newVmId = () => crypto.randomBytes(10).toString("hex")
