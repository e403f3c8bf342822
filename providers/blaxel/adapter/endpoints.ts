/**
 * Blaxel endpoints are previews: `POST /sandboxes/{name}/previews {metadata: {name}, spec: {port, public: true,
 * ttl: "<n>s"}}` answers the preview's URL; the lease id is the preview's name (`metal-<port>-<random>`), revoked
 * with `DELETE /sandboxes/{name}/previews/{preview}` (404: already gone). Public previews need no token.
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import * as crypto from "node:crypto"
import { endpointRequestProblem } from "../../../src/providers/errors.ts"
import { type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { type BlaxelContext, NAME, WirePreview } from "./wire.ts"

export const makeEndpoints = (ctx: BlaxelContext) => {
  const { api, decode, fail, send } = ctx
  const previews = (resourceId: string) => `/sandboxes/${encodeURIComponent(resourceId)}/previews`

  const exposeHttpEndpoint: SandboxProvider["exposeHttpEndpoint"] = (sandbox, input) =>
    Effect.gen(function*() {
      const problem = endpointRequestProblem(NAME, ctx.capabilities.httpEndpoints, input)
      if (problem !== undefined) return yield* problem
      const name = `metal-${input.port}-${crypto.randomBytes(5).toString("hex")}`
      const body = { metadata: { name }, spec: { port: input.port, public: true, ttl: `${input.leaseSeconds}s` } }
      const preview = yield* send(api("POST", previews(sandbox.resourceId)).pipe(HttpClientRequest.bodyUnsafeJson(body)), "create preview").pipe(
        Effect.flatMap(decode(WirePreview, "create preview"))
      )
      return { leaseId: preview.metadata.name, url: preview.spec.url, expiresAt: new Date(Date.now() + input.leaseSeconds * 1000).toISOString() }
    })

  const revokeHttpEndpoint: SandboxProvider["revokeHttpEndpoint"] = (sandbox, leaseId) =>
    Effect.gen(function*() {
      if (ctx.capabilities.httpEndpoints?.revoke !== true) return yield* unsupported(NAME, "HTTP endpoints")
      if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(leaseId)) return yield* fail("invalid_request", `${leaseId} is not a Blaxel preview name`)
      return yield* send(api("DELETE", `${previews(sandbox.resourceId)}/${leaseId}`), "delete preview").pipe(
        Effect.as({ revoked: true }),
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed({ revoked: false }))
      )
    })

  return { exposeHttpEndpoint, revokeHttpEndpoint }
}
