/** What `GET /ready` states: the database answers, its engine, and the nodes sharing it with their heartbeats. */
import { Effect } from "effect"
import { Db } from "../db/Db.ts"
import { Dialect } from "../db/Dialect.ts"
import { NodesRepo } from "../db/repos/Nodes.ts"

export interface Readiness {
  readonly engine: "pg" | "sqlite"
  readonly nodes: ReadonlyArray<{ readonly id: string; readonly url: string | null; readonly heartbeatAgeSeconds: number; readonly lost: boolean }>
}

/** Fails (with the database's cause) when the database does not answer. */
export const readiness = Effect.gen(function*() {
  const db = yield* Db
  const dialect = yield* Dialect
  yield* db.ping
  const rows = yield* NodesRepo.all
  const now = Date.now()
  return {
    engine: dialect.engine === "pg" ? "pg" : "sqlite",
    nodes: rows.map((n) => ({
      id: n.id,
      url: n.url,
      heartbeatAgeSeconds: Math.max(0, Math.round((now - Date.parse(n.heartbeat_at)) / 100) / 10),
      lost: n.lost_at !== null
    }))
  } satisfies Readiness
})
