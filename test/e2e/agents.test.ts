/**
 * What agents need from a sandbox (issue 13), through the real gateway: operations readable as the reference says,
 * live output with `?follow=true`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Bootstrap, bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, parseSse, poll, waitOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let owner: Bootstrap
let auth: KeyAuth
let sandbox: any

/** A held-open SSE response read frame by frame: `next()` resolves with the next frame (comments skipped), or null at its end. */
const follow = async (route: string, a: KeyAuth | { token: string }, lastEventId?: string) => {
  const response = await fetch(server.url + route, {
    headers: {
      authorization: `Bearer ${a.token}`,
      ...("project" in a ? { "x-metal-project-id": a.project } : {}),
      ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId })
    }
  })
  expect(response.status).toBe(200)
  expect(response.headers.get("content-type")).toContain("text/event-stream")
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  const next = async (): Promise<{ id: number; event: string; data: any } | null> => {
    for (;;) {
      const end = buffer.indexOf("\n\n")
      if (end >= 0) {
        const block = buffer.slice(0, end + 2)
        buffer = buffer.slice(end + 2)
        const frames = parseSse(block)
        if (frames.length > 0) return frames[0]!
        continue // a comment (heartbeat)
      }
      const { done, value } = await reader.read()
      if (done) return null
      buffer += decoder.decode(value, { stream: true })
    }
  }
  return { next, cancel: () => reader.cancel() }
}

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  owner = await bootstrap(server.dataDir, "agents@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
  sandbox = await createReadySandbox(http, auth)
})
afterAll(() => server.stop())

describe("operations, readable as the reference says", () => {
  it("create with a key, pause with a user token on the project path, poll that operation (token and key), resume", async () => {
    const user = { token: owner.user_token }
    const paused = await http.post(`/v1/projects/${owner.project_id}/sandboxes/${sandbox.id}/pause`, user)
    expect(paused.status).toBe(200)
    const operationId = paused.body.operation.id
    const done = await poll(async () => (await http.get(`/v1/projects/${owner.project_id}/operations/${operationId}`, user)).body, (op) => op.state === "succeeded")
    expect(done).toMatchObject({ id: operationId, type: "sandbox_pause", state: "succeeded" })
    // The key that created the sandbox reads an operation a user caused on it; another key of the project does not.
    expect((await http.get(`/v1/operations/${operationId}`, auth)).body).toMatchObject({ id: operationId, state: "succeeded" })
    const other = (await http.post(`/v1/projects/${owner.project_id}/api-keys`, { token: owner.user_token, body: { name: "other" } })).body.key
    expectEnvelope(await http.get(`/v1/operations/${operationId}`, { token: other, project: owner.project_id }), 404, "not_found")
    const events = parseSse((await http.get(`/v1/projects/${owner.project_id}/operations/${operationId}/events`, user)).text)
    expect(events.at(-1)?.event).toBe("completed")
    // Members only: someone of another organization reads nothing of it.
    const stranger = await bootstrap(server.dataDir, "stranger@example.com")
    expectEnvelope(await http.get(`/v1/projects/${owner.project_id}/operations/${operationId}`, { token: stranger.user_token }), 404, "not_found")
    const resumed = await http.post(`/v1/projects/${owner.project_id}/sandboxes/${sandbox.id}/resume`, user)
    expect((await waitOperation(http, auth, resumed.body.operation.id)).state).toBe("succeeded")
  })
})

describe("live output (follow=true)", () => {
  it("sends each event as it is stored, while the process runs, and ends after the terminal event", async () => {
    // The process waits for a file before its second line, so the first line is seen while it surely still runs.
    const started = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, {
      ...auth,
      body: { command: ["sh", "-c", "echo one; while [ ! -e /workspace/go ]; do sleep 0.02; done; echo two"] },
      headers: { "idempotency-key": idempotencyKey() }
    })
    const processId = started.body.id
    const stream = await follow(`/v1/sandboxes/${sandbox.id}/processes/${processId}/events?follow=true`, auth)
    const seen: Array<string> = []
    for (;;) {
      const frame = await stream.next()
      expect(frame).not.toBeNull()
      seen.push(frame!.event)
      if (frame!.event === "stdout") {
        expect(Buffer.from(frame!.data.data.data_base64, "base64").toString()).toBe("one\n")
        break
      }
    }
    expect((await http.get(`/v1/sandboxes/${sandbox.id}/processes/${processId}`, auth)).body.state).toBe("running")
    const go = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/write`, { ...auth, body: { path: "/workspace/go", data_base64: "" }, headers: { "idempotency-key": idempotencyKey() } })
    expect(go.status).toBe(202)
    for (let frame = await stream.next(); frame !== null; frame = await stream.next()) seen.push(frame.event)
    expect(seen).toEqual(["queued", "started", "stdout", "stdout", "exited"])
    // Resuming after the last event of a finished process ends at once; a finite batch behaves as before.
    const again = await follow(`/v1/sandboxes/${sandbox.id}/processes/${processId}/events?follow=true`, auth, "5")
    expect(await again.next()).toBeNull()
    const batch = parseSse((await http.get(`/v1/sandboxes/${sandbox.id}/processes/${processId}/events?follow=false`, { ...auth, headers: { "last-event-id": "3" } })).text)
    expect(batch.map((f) => f.event)).toEqual(["stdout", "exited"])
  })

  it("follows an operation from Last-Event-ID to its completion", async () => {
    const paused = await http.post(`/v1/sandboxes/${sandbox.id}/actions/pause`, { ...auth, headers: { "idempotency-key": idempotencyKey() } })
    const stream = await follow(`/v1/operations/${paused.body.operation.id}/events?follow=true`, auth, "1")
    const types: Array<string> = []
    for (let frame = await stream.next(); frame !== null; frame = await stream.next()) types.push(frame.event)
    expect(types.at(-1)).toBe("completed")
    expect(types).not.toContain("queued") // event 1, before Last-Event-ID
    const resumed = await http.post(`/v1/sandboxes/${sandbox.id}/actions/resume`, { ...auth, headers: { "idempotency-key": idempotencyKey() } })
    await waitOperation(http, auth, resumed.body.operation.id)
  })

  it("refuses a follow value that is not true or false, and another project's process", async () => {
    expectEnvelope(await http.get(`/v1/operations/op_${"a".repeat(32)}/events?follow=yes`, auth), 422, "validation_error")
    const other = await bootstrap(server.dataDir, "other-agents@example.com")
    const started = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body: { command: ["true"] }, headers: { "idempotency-key": idempotencyKey() } })
    expectEnvelope(await http.get(`/v1/sandboxes/${sandbox.id}/processes/${started.body.id}/events?follow=true`, { token: other.api_key, project: other.project_id }), 404, "not_found")
  })
})

describe("finding sandboxes", () => {
  it("filters by state (any of several), provider and metadata (all entries), with cursors bound to the filters", async () => {
    const blue = await createReadySandbox(http, auth, { ...minimalSandbox(), metadata: { team: "blue", tier: "gold" } })
    const red = await createReadySandbox(http, auth, { ...minimalSandbox(), metadata: { team: "red", "odd key": "x\"y" } })
    const paused = await http.post(`/v1/sandboxes/${red.id}/actions/pause`, { ...auth, headers: { "idempotency-key": idempotencyKey() } })
    await waitOperation(http, auth, paused.body.operation.id)
    const ids = async (query: string) => {
      const res = await http.get(`/v1/sandboxes?${query}`, auth)
      expect(res.status).toBe(200)
      return res.body.sandboxes.map((s: any) => s.id)
    }
    expect(await ids("metadata.team=blue")).toEqual([blue.id])
    expect(await ids("metadata.team=blue&metadata.tier=gold")).toEqual([blue.id])
    expect(await ids("metadata.team=blue&metadata.tier=silver")).toEqual([])
    expect(await ids(`metadata.odd%20key=${encodeURIComponent("x\"y")}`)).toEqual([red.id])
    expect(await ids("state=paused")).toEqual([red.id])
    expect(await ids("state=ready&state=paused&metadata.team=red")).toEqual([red.id])
    expect((await ids("state=ready&state=paused")).length).toBeGreaterThanOrEqual(3)
    expect(await ids("provider=e2b")).toEqual([])
    expect(await ids("provider=daytona&metadata.team=blue")).toEqual([blue.id])
    // Paging keeps the filters; a cursor of another list (other filters) is refused.
    const first = (await http.get("/v1/sandboxes?state=ready&state=paused&limit=1", auth)).body
    expect(first.next_cursor).not.toBeNull()
    const second = (await http.get(`/v1/sandboxes?state=ready&state=paused&limit=1&cursor=${first.next_cursor}`, auth)).body
    expect(second.sandboxes[0].id).not.toBe(first.sandboxes[0].id)
    expectEnvelope(await http.get(`/v1/sandboxes?state=paused&limit=1&cursor=${first.next_cursor}`, auth), 422, "validation_error")
    // Bad filters are 422 at the parameter.
    expectEnvelope(await http.get("/v1/sandboxes?state=running", auth), 422, "validation_error")
    expectEnvelope(await http.get(`/v1/sandboxes?metadata.${"k".repeat(257)}=v`, auth), 422, "validation_error")
    expectEnvelope(await http.get(`/v1/sandboxes?${Array.from({ length: 17 }, (_, i) => `metadata.k${i}=v`).join("&")}`, auth), 422, "validation_error")
  }, 60_000)
})

describe("run and wait", () => {
  it("answers 201 with the finished process when it ends within wait_seconds, else 202 as before", async () => {
    const post = (command: Array<string>, wait: string) =>
      http.post(`/v1/sandboxes/${sandbox.id}/processes?wait_seconds=${wait}`, { ...auth, body: { command }, headers: { "idempotency-key": idempotencyKey() } })
    const quick = await post(["sh", "-c", "echo hi"], "30")
    expect(quick.status).toBe(201)
    expect(quick.body).toMatchObject({ state: "succeeded", exit_code: 0 })
    expect(quick.headers.get("location")).toBe(`/v1/sandboxes/${sandbox.id}/processes/${quick.body.id}`)
    const slow = await post(["sleep", "30"], "1")
    expect(slow.status).toBe(202)
    expect(["queued", "running"]).toContain(slow.body.state)
    await http.post(`/v1/sandboxes/${sandbox.id}/processes/${slow.body.id}/actions/cancel`, auth)
    expectEnvelope(await post(["true"], "301"), 422, "validation_error")
  })
})
