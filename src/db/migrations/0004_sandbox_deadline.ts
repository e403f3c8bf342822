/**
 * A sandbox's runtime deadline (`expires_at`): when its runtime timeout fires, as armed when it became ready (or
 * resumed) and as moved by `actions/extend`; null while it has none running (before ready, paused, ended).
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  yield* ddl([
    `ALTER TABLE sandboxes ADD COLUMN expires_at TEXT`
  ])
})
