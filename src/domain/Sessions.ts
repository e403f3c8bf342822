/** The dashboard's sign-in (docs/guide/dashboard.md): what `POST /v1/sessions` takes and what the session routes answer. */
import { Schema } from "effect"
import { strict } from "./Accounts.ts"
import { UserId } from "./Ids.ts"

const Secret = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))

export const SignInWithToken = Schema.Struct({
  user_token: Secret.annotations({ description: "A user access token (`metal_ut_…`); the session ends with it, if sooner" })
}).annotations({ identifier: "SignInWithToken", ...strict })

export const SignInWithLink = Schema.Struct({
  login_code: Secret.annotations({ description: "The code of a one-time sign-in link (`login-link` in the operator CLI): valid 10 minutes, once" })
}).annotations({ identifier: "SignInWithLink", ...strict })

export const SignIn = Schema.Union(SignInWithToken, SignInWithLink).annotations({ identifier: "SignIn" })

export const SessionUser = Schema.Struct({ id: UserId, email: Schema.String }).annotations({ identifier: "SessionUser" })

export const Session = Schema.Struct({
  user: SessionUser,
  /** Null for a bearer token (it is not a session). */
  expires_at: Schema.NullOr(Schema.String),
  via: Schema.Literal("session", "token").annotations({ description: "`session`: the dashboard's cookie; `token`: a bearer access token" })
}).annotations({ identifier: "Session" })

export const SignedOut = Schema.Struct({ signed_out: Schema.Literal(true) }).annotations({ identifier: "SignedOut" })
