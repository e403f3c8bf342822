/**
 * A job remembers the trace it was enqueued in (src/services/Tracing.ts): `trace_parent` is the W3C `traceparent` of
 * the span that enqueued it (a request's, usually), so the job's run shows in the same trace as the request that
 * asked for it, even when it runs on another replica or after a restart. NULL for jobs enqueued outside a span.
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  yield* ddl([`ALTER TABLE jobs ADD COLUMN trace_parent TEXT`])
})
