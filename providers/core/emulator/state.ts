/**
 * An emulator's books, as a provider's cloud keeps them: a home under DATA_DIR/emulators/<name>, an API key made
 * once, and state that survives restarts (written atomically).
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

export const emulatorHome = (dataDir: string, name: string) => {
  const dir = path.join(dataDir, "emulators", name)
  fs.mkdirSync(dir, { recursive: true })
  return dir
}

/** The emulator's API key, created on first start with mode 0600. */
export const emulatorKey = (dir: string, make: () => string = () => crypto.randomBytes(24).toString("base64url")) => {
  const file = path.join(dir, "api-key")
  if (!fs.existsSync(file)) fs.writeFileSync(file, make(), { mode: 0o600 })
  return fs.readFileSync(file, "utf8").trim()
}

/** Loads the emulator's state (or `initial`) and returns it with an atomic `save`. */
export const persistentState = <S>(dir: string, initial: () => S) => {
  const file = path.join(dir, "state.json")
  const state: S = fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, "utf8")) as S) : initial()
  const save = () => {
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(state))
    fs.renameSync(`${file}.tmp`, file)
  }
  return { state, save }
}

/**
 * Many small records kept one file each under `dir/<name>/` (named by a hash of the key), loaded at start: for
 * state that grows with use (a session per process), so saving one record does not rewrite all of them.
 */
export const persistentRecords = <V>(dir: string, name: string) => {
  const folder = path.join(dir, name)
  fs.mkdirSync(folder, { recursive: true })
  const fileOf = (key: string) => path.join(folder, `${crypto.createHash("sha256").update(key).digest("hex").slice(0, 32)}.json`)
  const records = new Map<string, V>()
  for (const file of fs.readdirSync(folder)) {
    if (!file.endsWith(".json")) continue
    try {
      const { key, value } = JSON.parse(fs.readFileSync(path.join(folder, file), "utf8")) as { key: string; value: V }
      records.set(key, value)
    } catch {
      // a record cut short by a crash mid-write: it was never acknowledged, so it is dropped
    }
  }
  return {
    get: (key: string) => records.get(key),
    entries: () => [...records.entries()],
    /** Held in memory only, until `set`. */
    remember: (key: string, value: V) => void records.set(key, value),
    set: (key: string, value: V) => {
      records.set(key, value)
      const file = fileOf(key)
      fs.writeFileSync(`${file}.tmp`, JSON.stringify({ key, value }))
      fs.renameSync(`${file}.tmp`, file)
    },
    delete: (key: string) => {
      records.delete(key)
      fs.rmSync(fileOf(key), { force: true })
    }
  }
}
