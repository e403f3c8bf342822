/**
 * Revocation cuts live streams (issue 22, finding 5; services/LiveStreams.ts): a stream held open ends within
 * seconds once the credential that opened it may no longer — not when the client next reconnects. Each test opens a
 * stream, makes it live (a frame, a typed line answered), takes the access away and waits for the server to end
 * the stream before a deadline of a few seconds; the stream's last word says why.
 *
 * - an API key revoked: its `?follow=true` process event stream and its followed operation (both served by FastReads), its
 *   terminal attach (close 4001);
 * - an API key whose expires_at passes while its stream is open;
 * - a user token revoked (the CLI: another process): its `/v1/events/stream`;
 * - a member removed from the organization: their `/v1/events/stream`;
 * - a project deleted, an organization deleted: the `/v1/events/stream` on its project;
 * - a dashboard session signed out: its follow stream and terminal attach on the project path, its events stream.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { appendOperationEvent, execSql, insertRunningOperation, joinAs, querySql, userToken } from "../support/accounts.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox } from "../support/sandbox.ts"
import { api, type Bootstrap, bootstrap, expectEnvelope, runCli, type RunningServer, startServer } from "../support/server.ts"
import { openSse } from "../support/sse.ts"
import { attachTerminal, keyHeaders } from "../support/terminals.ts"

/** How long the server may take to end a stream once its access is gone (the promise is "within 5 s"). */
const CUT_WITHIN_MS = 5_000

let server: RunningServer
let http: ReturnType<typeof api>
let owner: Bootstrap
let sandboxId: string
/** A second user token of the owner's (the CLI's `tokens create`), revoked by the CLI in its test. */
let extraToken: { token: string; token_id: string }
/** A user who is not yet a member of the owner's organization. */
let joinerToken: string

/** A fresh API key of the owner's project (each test revokes or expires its own). */
const newKey = async (name: string): Promise<{ id: string; auth: KeyAuth }> => {
  const issued = await http.post(`/v1/projects/${owner.project_id}/api-keys`, { token: owner.user_token, body: { name } })
  expect(issued.status).toBe(201)
  return { id: issued.body.api_key.id, auth: { token: issued.body.key, project: owner.project_id } }
}

const revokeKey = async (id: string) =>
  expect((await http.post(`/v1/projects/${owner.project_id}/api-keys/${id}/revoke`, { token: owner.user_token })).status).toBe(200)

/** A process that prints a line, then runs for a long while: its follow stream stays open unless cut. */
const longProcess = async (auth: KeyAuth) => {
  const started = await http.post(`/v1/sandboxes/${sandboxId}/processes`, { ...auth, body: { command: ["sh", "-c", "echo ready; sleep 300"] }, headers: { "idempotency-key": idempotencyKey("p") } })
  expect(started.status).toBe(202)
  return started.body.id as string
}

const followProcess = (auth: KeyAuth, processId: string) => openSse(`${server.url}/v1/sandboxes/${sandboxId}/processes/${processId}/events?follow=true`, keyHeaders(auth))
const eventStream = (token: string, projectId: string) => openSse(`${server.url}/v1/events/stream?project_id=${projectId}`, { authorization: `Bearer ${token}` })

/** The stream's last frame is the error envelope saying why it ended. */
const expectEndFrame = (frames: ReadonlyArray<{ id: string | undefined; event: string; data: any }>, code: string, reason: string) => {
  const last = frames.at(-1)
  expect(last?.event).toBe("error")
  expect(last?.id).toBeUndefined()
  expect(last?.data).toMatchObject({ code, retryable: false, details: { reason } })
  expect(typeof last?.data.message).toBe("string")
  expect(last?.data.request_id).toMatch(/^req_/)
}

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  owner = await bootstrap(server.dataDir, "revocation@example.com")
  // A sandbox with terminals (its processes are followed and attached to), and the CLI's work, side by side.
  const [sandbox, issued, joiner] = await Promise.all([
    createReadySandbox(http, { token: owner.api_key, project: owner.project_id }, minimalSandbox({ provider: "e2b", features: { pty: true } })),
    runCli(server.dataDir, ["tokens", "create", "--email", "revocation@example.com", "--json"]),
    userToken(server.dataDir, "removed-member@example.com")
  ])
  sandboxId = sandbox.id
  expect(issued.code).toBe(0)
  extraToken = JSON.parse(issued.stdout)
  joinerToken = joiner
}, 120_000)
afterAll(() => server.stop())

describe("revocation ends the streams a credential opened", () => {
  it("a revoked API key: its ?follow=true event stream ends with an error frame", async () => {
    const key = await newKey("follow")
    const stream = await followProcess(key.auth, await longProcess(key.auth))
    await stream.waitEvent("stdout")
    await revokeKey(key.id)
    await stream.waitEnd(CUT_WITHIN_MS)
    expectEndFrame(stream.frames, "unauthenticated", "credential_revoked")
    expectEnvelope(await http.get(`/v1/sandboxes/${sandboxId}`, key.auth), 401, "unauthenticated")
  })

  it("a revoked API key: its followed operation ends with an error frame", async () => {
    const key = await newKey("follow-operation")
    // An operation of the key's that stays running (a copy of the sandbox's create, with one event so far).
    const template = querySql<{ id: string }>(server.dataDir, "SELECT id FROM operations WHERE resource_id = ?", sandboxId)[0]!.id
    const operationId = `op_${crypto.randomUUID().replaceAll("-", "")}`
    insertRunningOperation(server.dataDir, template, operationId, key.id)
    appendOperationEvent(server.dataDir, operationId, 1, "queued")
    // A key already used (its last_used_at recorded), so that FastReads serves the follow rather than the full stack.
    expect((await http.get(`/v1/sandboxes/${sandboxId}`, key.auth)).status).toBe(200)
    const stream = await openSse(`${server.url}/v1/operations/${operationId}/events?follow=true`, keyHeaders(key.auth))
    await stream.waitEvent("queued")
    await revokeKey(key.id)
    await stream.waitEnd(CUT_WITHIN_MS)
    expectEndFrame(stream.frames, "unauthenticated", "credential_revoked")
  })

  it("a revoked API key: its terminal attach is closed 4001 after an error frame, and types nothing more", async () => {
    const key = await newKey("attach")
    const started = await http.post(`/v1/sandboxes/${sandboxId}/processes`, { ...key.auth, body: { command: ["sh", "-i"], pty: { cols: 80, rows: 24 } }, headers: { "idempotency-key": idempotencyKey("t") } })
    expect(started.status).toBe(202)
    const terminal = attachTerminal(server.url, sandboxId, started.body.id, key.auth)
    await terminal.opened
    terminal.type("echo before=$((20+1))\n")
    await terminal.waitOutput("before=21")
    await revokeKey(key.id)
    const deadline = Date.now() + CUT_WITHIN_MS
    while (terminal.state.closed === null && Date.now() < deadline) await Bun.sleep(10)
    expect(terminal.state.closed).toEqual({ code: 4001, reason: "credential revoked" })
    expect(terminal.state.frames.at(-1)).toMatchObject({ type: "error", code: "unauthenticated" })
    // The process runs on (closing an attach never touches it), but the revoked key cannot attach again.
    const again = attachTerminal(server.url, sandboxId, started.body.id, key.auth)
    await expect(again.opened).rejects.toThrow()
  })

  it("an API key that expires while its stream is open: the stream ends", async () => {
    const key = await newKey("expiring")
    const processId = await longProcess(key.auth)
    // Valid for two more seconds (what HTTP cannot do in a test's time: an hour is the shortest expires_in).
    execSql(server.dataDir, "UPDATE api_keys SET expires_at = ? WHERE id = ?", new Date(Date.now() + 2_000).toISOString(), key.id)
    const stream = await followProcess(key.auth, processId)
    await stream.waitEvent("stdout")
    await stream.waitEnd(2_000 + CUT_WITHIN_MS)
    expectEndFrame(stream.frames, "unauthenticated", "credential_expired")
  })

  it("a user token revoked by the CLI: its /v1/events/stream ends", async () => {
    const { token, token_id } = extraToken
    const stream = await eventStream(token, owner.project_id)
    // Live: an event of the project arrives.
    await http.post(`/v1/projects/${owner.project_id}/api-keys`, { token: owner.user_token, body: { name: "an event" } })
    await http.patch(`/v1/projects/${owner.project_id}`, { token: owner.user_token, body: { name: "revocation", slug: "revocation" } })
    await stream.waitEvent("project.updated")
    expect((await runCli(server.dataDir, ["tokens", "revoke", "--id", token_id])).code).toBe(0)
    await stream.waitEnd(CUT_WITHIN_MS)
    expectEndFrame(stream.frames, "unauthenticated", "credential_revoked")
  })

  it("a member removed from the organization: their /v1/events/stream ends", async () => {
    const memberToken = await joinAs(http, server.dataDir, owner.user_token, owner.organization_id, "removed-member@example.com", "member", joinerToken)
    const memberId = (await http.get(`/v1/organizations/${owner.organization_id}/members`, { token: memberToken })).body.viewer.user_id as string
    const stream = await eventStream(memberToken, owner.project_id)
    const mine = await eventStream(owner.user_token, owner.project_id)
    await http.patch(`/v1/projects/${owner.project_id}`, { token: owner.user_token, body: { name: "members", slug: "revocation" } })
    await stream.waitEvent("project.updated")
    expect((await http.delete(`/v1/organizations/${owner.organization_id}/members/${memberId}`, { token: owner.user_token })).status).toBe(200)
    await stream.waitEnd(CUT_WITHIN_MS)
    expectEndFrame(stream.frames, "forbidden", "access_removed")
    // The owner's stream on the same project goes on.
    await http.patch(`/v1/projects/${owner.project_id}`, { token: owner.user_token, body: { name: "after", slug: "revocation" } })
    await mine.waitEvent("project.updated")
    await Bun.sleep(50)
    expect(mine.ended()).toBe(false)
  })

  it("a project deleted: the /v1/events/stream on it ends", async () => {
    const created = await http.post(`/v1/organizations/${owner.organization_id}/projects`, { token: owner.user_token, body: { name: "short-lived", slug: "short-lived" } })
    expect(created.status).toBe(201)
    const stream = await eventStream(owner.user_token, created.body.id)
    await http.patch(`/v1/projects/${created.body.id}`, { token: owner.user_token, body: { name: "short-lived", slug: "short-lived-2" } })
    await stream.waitEvent("project.updated")
    expect((await http.delete(`/v1/projects/${created.body.id}`, { token: owner.user_token })).status).toBe(200)
    await stream.waitEnd(CUT_WITHIN_MS)
    expectEndFrame(stream.frames, "forbidden", "access_removed")
  })

  it("an organization deleted: the /v1/events/stream on its project ends", async () => {
    // A second organization of the owner's: no credit (the welcome credit went to the first), so it can go.
    const org = await http.post("/v1/organizations", { token: owner.user_token, body: { name: "Doomed", slug: "doomed-streams" } })
    expect(org.status).toBe(201)
    const project = await http.post(`/v1/organizations/${org.body.id}/projects`, { token: owner.user_token, body: { name: "doomed", slug: "doomed" } })
    expect(project.status).toBe(201)
    const stream = await eventStream(owner.user_token, project.body.id)
    await http.patch(`/v1/projects/${project.body.id}`, { token: owner.user_token, body: { name: "doomed", slug: "doomed-2" } })
    await stream.waitEvent("project.updated")
    expect((await http.delete(`/v1/organizations/${org.body.id}`, { token: owner.user_token, body: { confirm_name: "Doomed" } })).status).toBe(200)
    await stream.waitEnd(CUT_WITHIN_MS)
    expectEndFrame(stream.frames, "forbidden", "access_removed")
  })

  it("a dashboard session signed out: its project-path follow stream, terminal attach and /v1/events/stream end", async () => {
    const page = { origin: server.url, "x-metal-csrf": "1" }
    const signedIn = await http.post("/v1/sessions", { body: { user_token: owner.user_token }, headers: page })
    expect(signedIn.status, signedIn.text).toBe(201)
    const cookie = signedIn.headers.get("set-cookie")!.split(";")[0]!
    const processId = await longProcess({ token: owner.api_key, project: owner.project_id })
    const base = `${server.url}/v1/projects/${owner.project_id}/sandboxes/${sandboxId}`
    const follow = await openSse(`${base}/processes/${processId}/events?follow=true`, { cookie })
    await follow.waitEvent("stdout")
    const feed = await openSse(`${server.url}/v1/events/stream?project_id=${owner.project_id}`, { cookie })
    await http.patch(`/v1/projects/${owner.project_id}`, { token: owner.user_token, body: { name: "session", slug: "revocation" } })
    await feed.waitEvent("project.updated")
    const shell = await http.post(`/v1/projects/${owner.project_id}/sandboxes/${sandboxId}/processes`, {
      body: { command: ["sh", "-i"], pty: { cols: 80, rows: 24 } },
      headers: { cookie, ...page, "idempotency-key": idempotencyKey("s") }
    })
    expect(shell.status, shell.text).toBe(202)
    const terminal = attachTerminal(server.url, sandboxId, shell.body.id, null, { projectId: owner.project_id, headers: { cookie, origin: server.url } })
    await terminal.opened
    terminal.type("echo before=$((20+2))\n")
    await terminal.waitOutput("before=22")

    expect((await http.delete("/v1/sessions/current", { headers: { cookie, ...page } })).status).toBe(200)
    await follow.waitEnd(CUT_WITHIN_MS)
    expectEndFrame(follow.frames, "unauthenticated", "credential_revoked")
    await feed.waitEnd(CUT_WITHIN_MS)
    expectEndFrame(feed.frames, "unauthenticated", "credential_revoked")
    const deadline = Date.now() + CUT_WITHIN_MS
    while (terminal.state.closed === null && Date.now() < deadline) await Bun.sleep(10)
    expect(terminal.state.closed).toEqual({ code: 4001, reason: "credential revoked" })
    expect(terminal.state.frames.at(-1)).toMatchObject({ type: "error", code: "unauthenticated" })
  })
})
