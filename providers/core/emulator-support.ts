/**
 * What every emulator needs: a home under DATA_DIR/emulators/<name>, an API key made once, state that survives
 * restarts (written atomically), a port that stays the same across restarts (stored sandboxes carry the
 * provider's URLs), runtime calls that throw the runtime's typed error, and the error status for it.
 */
import { Cause, Effect, Exit, Option } from "effect"
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

/** Runs an Effect; its typed failure (a RuntimeError with its `kind`) is what gets thrown. */
export const runOrThrow = async <A, E>(effect: Effect.Effect<A, E>): Promise<A> => {
  const exit = await Effect.runPromiseExit(effect)
  if (Exit.isSuccess(exit)) return exit.value
  const failure = Cause.failureOption(exit.cause)
  throw Option.isSome(failure) ? failure.value : Cause.squash(exit.cause)
}

/**
 * The message an emulator answers for something thrown in a handler: a runtime failure's own message (it says what
 * failed in the sandbox), never the text of anything else — a crash's message is JavaScript (`undefined is not an
 * object (evaluating …)`), which no provider would send. That goes to stderr for the operator.
 */
export const emulatorMessage = (e: unknown, emulator: string): string => {
  if (typeof e === "object" && e !== null && (e as { _tag?: unknown })._tag === "RuntimeError") return String((e as { message?: unknown }).message)
  console.error(`${emulator} emulator: unexpected failure`, e)
  return "internal error"
}

/** The HTTP status for a runtime failure thrown inside an emulator handler. */
export const statusOfRuntimeError = (e: unknown): number => {
  const kind = (e as { kind?: string }).kind
  return kind === "not_found" ? 404 : kind === "conflict" ? 409 : kind === "invalid" ? 400 : 500
}

/** Serves on the port used last time for this emulator (or a new one if it is taken) and remembers it. */
export const servePersistent = <T extends { readonly port: number | undefined }>(dir: string, serve: (port: number) => T): T => {
  const file = path.join(dir, "port")
  const saved = fs.existsSync(file) ? Number(fs.readFileSync(file, "utf8")) : 0
  let server: T
  try {
    server = serve(saved)
  } catch {
    server = serve(0)
  }
  fs.writeFileSync(file, String(server.port))
  return server
}
