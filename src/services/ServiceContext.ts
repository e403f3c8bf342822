/**
 * The context the services run in: the repositories, transactions and the dialect (src/db/Database.ts). A handler
 * group captures it once, when it is built, and provides it to each request's effect; it never uses a
 * repository itself (scripts/check-layers.ts: src/http imports src/db only for types).
 */
import { provideRepositories, repositories } from "../db/Database.ts"

/** The database layer (connection, migrations, dialect, repositories) and SQLite's checkpointer, for the program's composition (http/Http.ts). */
export { DatabaseLive } from "../db/Database.ts"
export { CheckpointerLive } from "../db/Checkpointer.ts"
/** Whether a failure is the database being busy (the error envelope answers it 503, retryable). */
export { isDatabaseBusy } from "../db/Sql.ts"

export type { Repositories as ServiceContext } from "../db/Database.ts"

/** The captured context (only the repositories: a whole captured context would carry the layer's Scope too). */
export const serviceContext = repositories

/** `Effect.provide` of the captured context. */
export const provideServiceContext = provideRepositories
