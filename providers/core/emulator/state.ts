/**
 * An emulator's books, as a provider's cloud keeps them: a home under DATA_DIR/emulators/<name>, an API key made
 * once (and the account's other values beside it), and state that survives restarts (written atomically, read
 * back through a Schema: a file that does not decode is moved aside and the emulator starts without it, as a
 * provider that lost its books would).
 */
import { Either, ParseResult, Schema } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { replaceFile } from "../../../src/runtime/ReplaceFile.ts"

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

/**
 * A value of the emulator's account that is not a secret (its workspace, team or project), written once to
 * `dir/<file>` like the API key, so that an operator (or a test storing BYOK credentials) reads it where the key is.
 */
export const emulatorAccountValue = (dir: string, file: string, value: string) => {
  const at = path.join(dir, file)
  if (!fs.existsSync(at)) fs.writeFileSync(at, value)
  return fs.readFileSync(at, "utf8").trim()
}

/** A JSON file decoded by `schema`; undefined when absent, and when unreadable (then moved aside, with a warning). */
const load = <S, I>(file: string, schema: Schema.Schema<S, I>): S | undefined => {
  if (!fs.existsSync(file)) return undefined
  const decoded = Schema.decodeUnknownEither(Schema.parseJson(schema))(fs.readFileSync(file, "utf8"))
  if (Either.isRight(decoded)) return decoded.right
  const aside = `${file}.unreadable-${Date.now()}`
  fs.renameSync(file, aside)
  console.error(`emulator state ${file} could not be read, moved to ${aside}: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}`)
  return undefined
}

/**
 * Loads the emulator's state (or `initial`) and returns it with an atomic `save`. Saved as plain JSON: the
 * state schemas only add defaults and accept older shapes when decoding, so the in-memory form is itself a valid
 * encoded form (checked by the next load), and a save stays a JSON.stringify (a Schema encode of a few hundred
 * sandboxes costs ~15× more, on every create).
 */
export const persistentState = <S, I>(dir: string, schema: Schema.Schema<S, I>, initial: () => S) => {
  const file = path.join(dir, "state.json")
  const state: S = load(file, schema) ?? initial()
  return { state, save: () => replaceFile(file, JSON.stringify(state), { mode: 0o600 }) }
}

/**
 * Many small records kept one file each under `dir/<name>/` (named by a hash of the key), loaded at start: for
 * state that grows with use (a session per process), so saving one record does not rewrite all of them.
 */
export const persistentRecords = <V, I>(dir: string, name: string, value: Schema.Schema<V, I>) => {
  const Entry = Schema.Struct({ key: Schema.String, value })
  const folder = path.join(dir, name)
  fs.mkdirSync(folder, { recursive: true })
  const fileOf = (key: string) => path.join(folder, `${crypto.createHash("sha256").update(key).digest("hex").slice(0, 32)}.json`)
  const records = new Map<string, V>()
  for (const file of fs.readdirSync(folder)) {
    if (!file.endsWith(".json")) continue
    // A record cut short by a crash mid-write was never acknowledged: it is dropped (moved aside).
    const entry = load(path.join(folder, file), Entry)
    if (entry !== undefined) records.set(entry.key, entry.value)
  }
  return {
    get: (key: string) => records.get(key),
    entries: () => [...records.entries()],
    /** Held in memory only, until `set`. */
    remember: (key: string, value: V) => void records.set(key, value),
    set: (key: string, value: V) => {
      records.set(key, value)
      replaceFile(fileOf(key), JSON.stringify({ key, value }), { mode: 0o600 })
    },
    delete: (key: string) => {
      records.delete(key)
      fs.rmSync(fileOf(key), { force: true })
    }
  }
}

/**
 * `f` run at most once per `ms` (called more often, it does nothing): an emulator's books forget old records when
 * touched, not on a timer of their own. `f` gets the time it runs at.
 */
export const atMostEvery = (ms: number, f: (now: number) => void): (() => void) => {
  let last = 0
  return () => {
    const now = Date.now()
    if (now - last <= ms) return
    last = now
    f(now)
  }
}

/**
 * An emulator's sweep (the provider's timers: a TTL, a keep-alive, a longest run) every `ms`, one at a time (a
 * sweep still running when the next is due makes that one a no-op), never keeping the process alive; what it
 * throws is dropped (each sweep is tried again at the next tick). `stop` ends it.
 */
export const sweepEvery = (ms: number, sweep: (now: number) => Promise<unknown>, options: { readonly atOnce?: boolean } = {}): { readonly stop: () => void } => {
  let sweeping = false
  const tick = () => {
    if (sweeping) return
    sweeping = true
    void sweep(Date.now()).catch(() => undefined).finally(() => (sweeping = false))
  }
  const timer = setInterval(tick, ms)
  timer.unref()
  // `atOnce`: also now (an emulator started again finds what came due while it was down).
  if (options.atOnce === true) tick()
  return { stop: () => clearInterval(timer) }
}
