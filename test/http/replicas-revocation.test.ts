/**
 * Revocation across replicas (issue 22, finding 5; services/LiveStreams.ts): two gateway processes on one
 * PostgreSQL database; access is taken away through node A while the streams are held by node B, which must end
 * them within seconds (A announces the change: Signals.publish + Db.announce; B also re-checks every second).
 * PostgreSQL run only.
 *
 * - an API key revoked through A: its `?follow=true` stream on B ends with the error frame, and its terminal
 *   attach through B (relayed to the sandbox's node, A) is closed 4001;
 * - a member removed through A: their `/v1/events/stream` on B ends.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { joinAs, querySql, userToken } from "../support/accounts.ts"
import { databaseUrlFor, onPostgres } from "../support/postgres.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox } from "../support/sandbox.ts"
import { api, type Bootstrap, bootstrap, destroyJails, type RunningServer, startServer, tempDataDir } from "../support/server.ts"
import { openSse } from "../support/sse.ts"
import { attachTerminal, keyHeaders } from "../support/terminals.ts"

const CUT_WITHIN_MS = 5_000

describe.skipIf(!onPostgres())("revocation on one replica ends the streams another holds", () => {
  const dataA = tempDataDir("revoke-a")
  const dataB = tempDataDir("revoke-b")
  let a: RunningServer
  let b: RunningServer
  let http: { a: ReturnType<typeof api>; b: ReturnType<typeof api> }
  let owner: Bootstrap
  let sandboxId: string
  /** A user who is not yet a member of the owner's organization. */
  let joinerToken: string

  const env = (node: string) => ({ DATABASE_URL: databaseUrlFor(dataA)!, NODE_ID: node, NODE_GRACE_SECONDS: "60", CLUSTER_SECRET: "replicas-revocation-secret" })

  beforeAll(async () => {
    a = await startServer({ dataDir: dataA, env: env("node-a") })
    owner = await bootstrap(dataA, "replica-revocation@example.com")
    const httpA = api(a.url)
    // A alone: the sandbox lives on A, so B relays attaches to it. The CLI's user beside it.
    const [sandbox, joiner] = await Promise.all([
      createReadySandbox(httpA, { token: owner.api_key, project: owner.project_id }, minimalSandbox({ provider: "e2b", features: { pty: true } })),
      userToken(dataA, "replica-member@example.com")
    ])
    sandboxId = sandbox.id
    joinerToken = joiner
    b = await startServer({ dataDir: dataB, env: env("node-b") })
    http = { a: httpA, b: api(b.url) }
    expect(querySql<{ node_id: string }>(dataA, "SELECT node_id FROM sandboxes")).toEqual([{ node_id: "node-a" }])
  }, 120_000)

  afterAll(async () => {
    await b?.stop()
    await a?.stop({ kill: true })
    await destroyJails(dataA)
  })

  it("an API key revoked through A: its follow stream and its relayed terminal attach on B end", async () => {
    const issued = await http.a.post(`/v1/projects/${owner.project_id}/api-keys`, { token: owner.user_token, body: { name: "replicated" } })
    expect(issued.status).toBe(201)
    const auth: KeyAuth = { token: issued.body.key, project: owner.project_id }
    const start = (body: Record<string, unknown>) => http.b.post(`/v1/sandboxes/${sandboxId}/processes`, { ...auth, body, headers: { "idempotency-key": idempotencyKey("p") } })

    const followed = await start({ command: ["sh", "-c", "echo ready; sleep 300"] })
    expect(followed.status).toBe(202)
    const stream = await openSse(`${b.url}/v1/sandboxes/${sandboxId}/processes/${followed.body.id}/events?follow=true`, keyHeaders(auth))
    await stream.waitEvent("stdout")

    const shell = await start({ command: ["sh", "-i"], pty: { cols: 80, rows: 24 } })
    expect(shell.status).toBe(202)
    const terminal = attachTerminal(b.url, sandboxId, shell.body.id, auth)
    await terminal.opened
    terminal.type("echo relayed=$((40+2))\n")
    await terminal.waitOutput("relayed=42")

    expect((await http.a.post(`/v1/projects/${owner.project_id}/api-keys/${issued.body.api_key.id}/revoke`, { token: owner.user_token })).status).toBe(200)
    await stream.waitEnd(CUT_WITHIN_MS)
    expect(stream.frames.at(-1)).toMatchObject({ event: "error", data: { code: "unauthenticated", details: { reason: "credential_revoked" } } })
    const deadline = Date.now() + CUT_WITHIN_MS
    while (terminal.state.closed === null && Date.now() < deadline) await Bun.sleep(10)
    expect(terminal.state.closed).toEqual({ code: 4001, reason: "credential revoked" })
  })

  it("a member removed through A: their event stream on B ends", async () => {
    const memberToken = await joinAs(http.a, dataA, owner.user_token, owner.organization_id, "replica-member@example.com", "member", joinerToken)
    const memberId = (await http.a.get(`/v1/organizations/${owner.organization_id}/members`, { token: memberToken })).body.viewer.user_id as string
    const stream = await openSse(`${b.url}/v1/events/stream?project_id=${owner.project_id}`, { authorization: `Bearer ${memberToken}` })
    await http.a.patch(`/v1/projects/${owner.project_id}`, { token: owner.user_token, body: { name: "replicated", slug: "replicated" } })
    await stream.waitEvent("project.updated")
    expect((await http.a.delete(`/v1/organizations/${owner.organization_id}/members/${memberId}`, { token: owner.user_token })).status).toBe(200)
    await stream.waitEnd(CUT_WITHIN_MS)
    expect(stream.frames.at(-1)).toMatchObject({ event: "error", data: { code: "forbidden", details: { reason: "access_removed" } } })
  })
})
