/**
 * No HTTP endpoints on Freestyle (reference §3.1). Freestyle does route domains to a VM's ports (`ports` and
 * `domains` at create, custom domain mappings), but a mapping has no lease: nothing ends it at an expiry, and the
 * gateway could not revoke one per lease. Both calls fail `unsupported`, as the declared capabilities say, so
 * eligibility never routes `public_ports` here.
 */
import { Effect } from "effect"
import { type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { NAME } from "./wire.ts"

export const makeEndpoints = () => {
  const exposeHttpEndpoint: SandboxProvider["exposeHttpEndpoint"] = () => Effect.fail(unsupported(NAME, "HTTP endpoints"))
  const revokeHttpEndpoint: SandboxProvider["revokeHttpEndpoint"] = () => Effect.fail(unsupported(NAME, "HTTP endpoints"))
  return { exposeHttpEndpoint, revokeHttpEndpoint }
}
