/**
 * Prime endpoints: none declared (reference §3.1, and the reference refuses ports before any request), so both
 * calls are `unsupported` and eligibility never routes a request for public ports here. Prime's exposed ports
 * (`POST /api/v1/sandbox/{id}/expose`) have no expiry, so they would not fit leases that end on their own.
 */
import { Effect } from "effect"
import { type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { NAME } from "./wire.ts"

export const makeEndpoints = () => ({
  exposeHttpEndpoint: () => Effect.fail(unsupported(NAME, "HTTP endpoints")),
  revokeHttpEndpoint: () => Effect.fail(unsupported(NAME, "HTTP endpoints"))
}) satisfies Partial<SandboxProvider>
