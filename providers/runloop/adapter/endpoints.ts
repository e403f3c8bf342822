/**
 * Runloop endpoints: none declared (reference §3.1 gives Runloop no HTTP endpoints), so both calls are
 * `unsupported` and eligibility never routes a request for public ports here. Runloop's tunnels
 * (`POST /v1/devboxes/{id}/enable_tunnel`: one per devbox for all its ports, without expiry, removed whole) do not
 * fit leases per port that expire and are revoked one by one.
 */
import { Effect } from "effect"
import { type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { NAME } from "./wire.ts"

export const makeEndpoints = () => ({
  exposeHttpEndpoint: () => Effect.fail(unsupported(NAME, "HTTP endpoints")),
  revokeHttpEndpoint: () => Effect.fail(unsupported(NAME, "HTTP endpoints"))
}) satisfies Partial<SandboxProvider>
