/**
 * What a sandbox got of the network (`resolved_network`, JSON): internet on or off, whether that was the request's
 * or the provider's default, and the domain lists its provider enforces. Null until the sandbox is placed.
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  yield* ddl([
    `ALTER TABLE sandboxes ADD COLUMN resolved_network TEXT`
  ])
})
