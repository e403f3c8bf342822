/**
 * No HTTP endpoints on Cloudflare through the bridge (reference §3.1 has none): the SDK's preview URLs need the
 * bridge's own domain routing and have no lease to end. Both calls fail `unsupported`, as declared.
 */
import { Effect } from "effect"
import { type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { NAME } from "./wire.ts"

export const makeEndpoints = () => {
  const exposeHttpEndpoint: SandboxProvider["exposeHttpEndpoint"] = () => Effect.fail(unsupported(NAME, "HTTP endpoints"))
  const revokeHttpEndpoint: SandboxProvider["revokeHttpEndpoint"] = () => Effect.fail(unsupported(NAME, "HTTP endpoints"))
  return { exposeHttpEndpoint, revokeHttpEndpoint }
}
