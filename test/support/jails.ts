/** The local runtime's jails as a test sees them on disk (DATA_DIR/sandboxes/<id>/state.json). */
import * as fs from "node:fs"
import * as path from "node:path"
import type { JailState } from "../../src/runtime/Jail.ts"

/** The jail of a gateway sandbox: whatever emulator made it labels it with the sandbox's id. */
export const jailOfSandbox = (dataDir: string, sandboxId: string): JailState => {
  const dir = path.join(dataDir, "sandboxes")
  for (const id of fs.readdirSync(dir)) {
    const file = path.join(dir, id, "state.json")
    if (!fs.existsSync(file)) continue
    const state = JSON.parse(fs.readFileSync(file, "utf8")) as JailState
    if (state.spec?.labels["metal.sandbox_id"] === sandboxId) return state
  }
  throw new Error(`no jail for ${sandboxId}`)
}
