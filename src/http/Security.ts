/**
 * Two credential kinds that are never interchangeable (ARCHITECTURE.md §6):
 * - user access tokens `metal_ut_…` on account routes (`UserAuth`, provides `CurrentUser`);
 * - project API keys `metal_sk_…` plus `X-Metal-Project-ID` on sandbox routes (`ProjectKeyAuth`, provides
 *   `CurrentProjectKey`): a missing header is 400, a malformed one 422, another project's id 403.
 * These are the contract's middleware tags; their checks are `Authentication.ts`.
 */
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { BadRequestWire, ForbiddenWire, UnauthenticatedWire, UnprocessableWire } from "../domain/Errors.ts"
import { CurrentProjectKey, CurrentUser } from "../domain/Principals.ts"

export class UserAuth extends HttpApiMiddleware.Tag<UserAuth>()("app/UserAuth", {
  failure: UnauthenticatedWire,
  provides: CurrentUser,
  security: {
    userToken: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(OpenApi.Description, "User access token (`metal_ut_…`), issued by `bun run cli tokens create`")
    )
  }
}) {}

export class ProjectKeyAuth extends HttpApiMiddleware.Tag<ProjectKeyAuth>()("app/ProjectKeyAuth", {
  failure: Schema.Union(UnauthenticatedWire, BadRequestWire, UnprocessableWire, ForbiddenWire),
  provides: CurrentProjectKey,
  security: {
    projectKey: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "Project API key (`metal_sk_…`), sent together with the `X-Metal-Project-ID` header"
      )
    )
  }
}) {}
