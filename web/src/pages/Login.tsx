/**
 * Signing in: with a one-time link from the operator CLI (`login-link`: the code arrives in the URL's fragment,
 * which no server sees, and is used at once), or by pasting a user access token. Either way the answer sets the
 * session cookie; the token itself is kept nowhere by the page.
 */
import { useEffect, useState } from "preact/hooks"
import { post } from "../api.ts"
import type { SessionW } from "../types.ts"
import { ErrorBox, Field, Form } from "../ui.tsx"

export const Login = ({ onSignedIn }: { readonly onSignedIn: (session: SessionW) => void }) => {
  const [token, setToken] = useState("")
  const [linkError, setLinkError] = useState<unknown>(undefined)
  const [usingLink, setUsingLink] = useState(false)
  useEffect(() => {
    const code = new URLSearchParams(location.hash.slice(1)).get("code")
    if (code === null) return
    // The code is spent now: take it out of the address bar and history.
    history.replaceState(null, "", location.pathname)
    setUsingLink(true)
    post<SessionW>("/v1/sessions", { login_code: code }, { quiet401: true }).then(onSignedIn, (e: unknown) => {
      setLinkError(e)
      setUsingLink(false)
    })
  }, [])
  return (
    <main class="page narrow" id="main">
      <h1>Sign in to Sandbox Gateway</h1>
      {usingLink && <p role="status">Signing you in with your link…</p>}
      {linkError !== undefined && <ErrorBox error={linkError} />}
      <section class="card">
        <h2>With a sign-in link</h2>
        <p>An operator makes one for you (valid 10 minutes, once):</p>
        <pre class="cmd">sandbox-gateway login-link --email you@example.com</pre>
      </section>
      <section class="card">
        <h2>With a user access token</h2>
        <Form submit="Sign in" busy="Signing in…" label="Sign in with a token" onSubmit={async () => onSignedIn(await post<SessionW>("/v1/sessions", { user_token: token.trim() }, { quiet401: true }))}>
          <Field label="User access token" type="password" value={token} onInput={setToken} required placeholder="metal_ut_…" autoComplete="off"
            hint="Exchanged for a session cookie; the page does not keep the token." />
        </Form>
      </section>
    </main>
  )
}
