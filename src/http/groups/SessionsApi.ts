/**
 * The dashboard's session (docs/guide/dashboard.md): sign in with a user access token or a one-time link's code
 * (the answer sets the session cookie, SessionCookie.ts), read who is signed in, sign out (the session is
 * revoked and the cookie cleared).
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { failsWith, Forbidden, NotFound, Unauthenticated } from "../../domain/Errors.ts"
import { Session, SignedOut, SignIn } from "../../domain/Sessions.ts"
import { UserAuth } from "../Security.ts"

export class SessionsApi extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.post("signIn", "/v1/sessions")
      .addError(failsWith(Forbidden, "csrf_failed"))
      .addError(failsWith(Unauthenticated, "unauthenticated"))
      .setPayload(SignIn)
      .addSuccess(Session, { status: 201 })
      .annotate(
        OpenApi.Description,
        "Starts a dashboard session and sets its cookie (`HttpOnly`, `SameSite=Strict`, `Secure` when PUBLIC_URL is https). Takes `user_token` (the session ends with the token, if sooner than in 7 days, and is revoked with it) or `login_code` (a one-time link's code: once, within 10 minutes). Needs `Origin` of the API's origin and the `X-Metal-CSRF` header (403 `csrf_failed`); 401 for a token or code that signs no one in."
      )
  )
  .add(HttpApiEndpoint.get("current", "/v1/sessions/current").addSuccess(Session).middleware(UserAuth))
  .add(
    HttpApiEndpoint.del("signOut", "/v1/sessions/current")
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(SignedOut)
      .middleware(UserAuth)
      .annotate(OpenApi.Description, "Revokes the session of the request's cookie and clears it; the cookie is refused from then on. 404 without a session cookie (a bearer token is revoked with `tokens revoke`).")
  )
  .annotate(OpenApi.Title, "Sessions")
{}
