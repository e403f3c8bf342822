/**
 * Two credential kinds that are never interchangeable (ARCHITECTURE.md §6):
 * - user access tokens `metal_ut_…` on account routes (`UserAuth`, provides `CurrentUser`) — or the dashboard's
 *   session cookie in their place (SessionCookie.ts: same rules, plus the origin and CSRF checks);
 * - project API keys `metal_sk_…` plus `X-Metal-Project-ID` on sandbox routes (`ProjectKeyAuth`, provides
 *   `CurrentProjectKey`): a missing header is 400, a malformed one 422, another project's id 403.
 * These are the contract's middleware tags; their checks are `Authentication.ts`.
 */
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { BadRequest, failsWith, Forbidden, Unauthenticated, Unprocessable } from "../domain/Errors.ts"
import { CurrentProjectKey, CurrentUser } from "../domain/Principals.ts"
import { SESSION_COOKIE } from "./SessionCookie.ts"

/** The security entries are tried in order: the bearer token, then the dashboard's session cookie. */
export class UserAuth extends HttpApiMiddleware.Tag<UserAuth>()("app/UserAuth", {
  failure: Schema.Union(failsWith(Unauthenticated, "unauthenticated"), failsWith(Forbidden, "csrf_failed")),
  provides: CurrentUser,
  security: {
    userToken: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(OpenApi.Description, "User access token (`metal_ut_…`), issued by `bun run cli tokens create`")
    ),
    session: HttpApiSecurity.apiKey({ in: "cookie", key: SESSION_COOKIE }).pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "The dashboard's session (`POST /v1/sessions`). Requests from another origin are refused (403 `csrf_failed`); changes also need `Origin` and the `X-Metal-CSRF` header."
      )
    )
  }
}) {}

export class ProjectKeyAuth extends HttpApiMiddleware.Tag<ProjectKeyAuth>()("app/ProjectKeyAuth", {
  failure: Schema.Union(
    failsWith(Unauthenticated, "unauthenticated"),
    failsWith(BadRequest, "project_header_required"),
    failsWith(Unprocessable, "validation_error"),
    failsWith(Forbidden, "forbidden")
  ),
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
