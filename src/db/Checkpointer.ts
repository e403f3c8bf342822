/**
 * WAL checkpoints on a worker thread. bun:sqlite is synchronous, so SQLite's automatic checkpoint (run by
 * whichever commit pushes the WAL past 1,000 pages) stalls the whole server while it copies the WAL into the
 * database: ~90 ms after a 10 MiB file read's result is stored. The server's connection turns automatic
 * checkpoints off, and a worker with its own connection runs a PASSIVE checkpoint (it never blocks readers or the
 * writer) every 250 ms. Should the worker stop, automatic checkpoints are turned back on.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Runtime } from "effect"
import { Worker } from "node:worker_threads"
import { AppConfig } from "../Config.ts"
import { databaseFile } from "./Sql.ts"

const EVERY_MS = 250
const SQLITE_DEFAULT_AUTOCHECKPOINT = 1000

/** The worker, as source (a file would not survive `bun build --compile`). */
const WORKER = `
const { parentPort, workerData } = require("node:worker_threads")
const { Database } = require("bun:sqlite")
const db = new Database(workerData.file)
db.run("PRAGMA busy_timeout = 1000")
const checkpoint = () => {
  try {
    db.run("PRAGMA wal_checkpoint(PASSIVE)")
  } catch {
    // busy: the next tick tries again
  }
}
setInterval(checkpoint, workerData.everyMs)
parentPort.postMessage("ready")
`

export const CheckpointerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { dataDir, databaseUrl } = yield* AppConfig
    // PostgreSQL checkpoints on its own.
    if (databaseUrl !== undefined) return
    const runtime = yield* Effect.runtime<never>()
    const autoCheckpoint = (pages: number) => sql.unsafe(`PRAGMA wal_autocheckpoint = ${pages}`).pipe(Effect.orDie)
    const worker = yield* Effect.acquireRelease(
      Effect.async<Worker, Error>((resume) => {
        const worker = new Worker(WORKER, { eval: true, workerData: { file: databaseFile(dataDir), everyMs: EVERY_MS } })
        worker.once("message", () => resume(Effect.succeed(worker)))
        worker.once("error", (e: Error) => resume(Effect.fail(e)))
      }),
      (worker) => Effect.promise(() => worker.terminate())
    ).pipe(Effect.timeout("10 seconds"), Effect.option)
    if (worker._tag === "None") return yield* Effect.logWarning("the checkpoint worker did not start; SQLite checkpoints on its own")
    yield* autoCheckpoint(0)
    const fallBack = () => Runtime.runFork(runtime)(Effect.zipRight(
      Effect.logWarning("the checkpoint worker stopped; SQLite checkpoints on its own again"),
      autoCheckpoint(SQLITE_DEFAULT_AUTOCHECKPOINT)
    ))
    worker.value.on("error", fallBack)
    // On shutdown: automatic checkpoints back on (the next process may run without a worker), and one last
    // checkpoint so the WAL does not carry over.
    yield* Effect.addFinalizer(() =>
      Effect.zipRight(autoCheckpoint(SQLITE_DEFAULT_AUTOCHECKPOINT), sql.unsafe("PRAGMA wal_checkpoint(PASSIVE)")).pipe(Effect.ignore)
    )
  })
)
