/**
 * No HTTP endpoints on Vercel (reference §3.1). Vercel does give public URLs (`routes`: one
 * `https://<subdomain>.vercel.run` per port named in `ports` at create), but only for the ports named when the
 * sandbox was made, for as long as it lives, with no call to take one back: a lease could neither start for a
 * port asked for later nor end at its expiry or revocation. Both calls fail `unsupported`, as the declared
 * capabilities say, so eligibility never routes `public_ports` here.
 */
import { Effect } from "effect"
import { type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { NAME } from "./wire.ts"

export const makeEndpoints = () => {
  const exposeHttpEndpoint: SandboxProvider["exposeHttpEndpoint"] = () => Effect.fail(unsupported(NAME, "HTTP endpoints"))
  const revokeHttpEndpoint: SandboxProvider["revokeHttpEndpoint"] = () => Effect.fail(unsupported(NAME, "HTTP endpoints"))
  return { exposeHttpEndpoint, revokeHttpEndpoint }
}
