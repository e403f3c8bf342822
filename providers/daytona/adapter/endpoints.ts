/**
 * Daytona endpoints: a signed preview URL per port (`GET …/ports/{port}/signed-preview-url?expiresInSeconds=`),
 * lease id `<port>:<token>`, revoked with `POST …/signed-preview-url/{token}/expire` (Daytona answers 200 whether
 * or not the token was live).
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import { endpointRequestProblem } from "../../../src/providers/errors.ts"
import { type SandboxProvider, unsupported } from "../../../src/providers/Provider.ts"
import { type DaytonaContext, NAME, WirePreview } from "./wire.ts"

export const makeEndpoints = (ctx: DaytonaContext) => {
  const { api, decode, fail, send } = ctx

  const exposeHttpEndpoint: SandboxProvider["exposeHttpEndpoint"] = (sandbox, input) =>
    Effect.gen(function*() {
      const problem = endpointRequestProblem(NAME, ctx.capabilities.httpEndpoints, input)
      if (problem !== undefined) return yield* problem
      const preview = yield* send(
        api("GET", `/sandbox/${encodeURIComponent(sandbox.resourceId)}/ports/${input.port}/signed-preview-url`).pipe(
          HttpClientRequest.setUrlParam("expiresInSeconds", String(input.leaseSeconds))
        ),
        "signed preview url",
        { mutating: true }
      ).pipe(Effect.flatMap(decode(WirePreview, "signed preview url")))
      return { leaseId: `${input.port}:${preview.token}`, url: preview.url, expiresAt: new Date(Date.now() + input.leaseSeconds * 1000).toISOString() }
    })

  const revokeHttpEndpoint: SandboxProvider["revokeHttpEndpoint"] = (sandbox, leaseId) =>
    Effect.gen(function*() {
      if (ctx.capabilities.httpEndpoints?.revoke !== true) return yield* unsupported(NAME, "HTTP endpoints")
      const match = /^(\d{1,5}):([A-Za-z0-9_-]+)$/.exec(leaseId)
      if (match === null) return yield* fail("invalid_request", `${leaseId} is not a Daytona lease id`)
      return yield* send(api("POST", `/sandbox/${encodeURIComponent(sandbox.resourceId)}/ports/${match[1]}/signed-preview-url/${match[2]}/expire`), "expire preview url").pipe(
        Effect.as({ revoked: true }),
        // The sandbox is gone, and its previews with it.
        Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed({ revoked: false }))
      )
    })

  return { exposeHttpEndpoint, revokeHttpEndpoint }
}
