/**
 * A sandbox's runtime deadline (`expires_at`): when its runtime timeout fires, as armed when it became ready (or
 * resumed) and as moved by `actions/extend`; null while it has none running (before ready, paused, ended).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`ALTER TABLE sandboxes ADD COLUMN expires_at TEXT`)
})
