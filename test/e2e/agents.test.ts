/**
 * What agents need from a sandbox (issue 13), through the real gateway: operations readable as the reference says,
 * live output with `?follow=true`.
 */
import { Database } from "bun:sqlite"
import fs from "node:fs"
import path from "node:path"
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
    const blue = await createReadySandbox(http, auth, { ...minimalSandbox({ provider: "daytona" }), metadata: { team: "blue", tier: "gold" } })
    const red = await createReadySandbox(http, auth, { ...minimalSandbox({ provider: "daytona" }), metadata: { team: "red", "odd key": "x\"y" } })
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
    expect(await ids("provider=e2b&metadata.team=blue")).toEqual([])
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
    // The output comes with it: one call for `echo hi`.
    expect(quick.body).toMatchObject({ state: "succeeded", exit_code: 0, stdout: "hi\n", stderr: "", output_capped: false })
    expect(quick.body).not.toHaveProperty("stdout_base64")
    const failed = await post(["sh", "-c", "echo out; echo err >&2; exit 3"], "30")
    expect(failed.body).toMatchObject({ state: "failed", exit_code: 3, stdout: "out\n", stderr: "err\n" })
    expect(quick.headers.get("location")).toBe(`/v1/sandboxes/${sandbox.id}/processes/${quick.body.id}`)
    const slow = await post(["sleep", "30"], "1")
    expect(slow.status).toBe(202)
    expect(["queued", "running"]).toContain(slow.body.state)
    await http.post(`/v1/sandboxes/${sandbox.id}/processes/${slow.body.id}/actions/cancel`, auth)
    expectEnvelope(await post(["true"], "301"), 422, "validation_error")
  })
})

describe("run and wait: the output in the answer", () => {
  const post = (script: string, body: Record<string, unknown> = {}) =>
    http.post(`/v1/sandboxes/${sandbox.id}/processes?wait_seconds=60`, { ...auth, body: { command: ["sh", "-c", script], ...body }, headers: { "idempotency-key": idempotencyKey() } })
  const eventBytes = async (processId: string, stream: string) => {
    const chunks: Array<Buffer> = []
    let last = 0
    for (;;) {
      const frames = parseSse((await http.get(`/v1/sandboxes/${sandbox.id}/processes/${processId}/events`, { ...auth, headers: { "last-event-id": String(last) } })).text)
      if (frames.length === 0) return Buffer.concat(chunks)
      for (const f of frames) {
        last = f.id
        if (f.event === stream) chunks.push(Buffer.from(f.data.data.data_base64, "base64"))
      }
    }
  }

  it("bytes that are not UTF-8 come as text with U+FFFD and, exactly, as base64", async () => {
    const answer = await post("printf 'ok\\377\\376'; printf 'fine' >&2")
    expect(answer.status).toBe(201)
    expect(answer.body).toMatchObject({ stdout: "ok\uFFFD\uFFFD", stdout_base64: Buffer.from([0x6f, 0x6b, 0xff, 0xfe]).toString("base64"), stderr: "fine" })
    expect(answer.body).not.toHaveProperty("stderr_base64")
  })

  it("carries at most 1 MiB of each stream, says output_capped, and the events keep all of it", async () => {
    // 1 MiB less one byte of "a", then "é" (2 bytes) across the cap: cut before the character, still plain text.
    const answer = await post("head -c 1048575 /dev/zero | tr '\\0' a; printf '\\303\\251tail'; echo small >&2")
    expect(answer.status).toBe(201)
    expect(answer.body).toMatchObject({ state: "succeeded", output_capped: true, output_truncated: false, stderr: "small\n" })
    expect(answer.body.stdout).toBe("a".repeat(1048575))
    expect(answer.body).not.toHaveProperty("stdout_base64")
    const kept = await eventBytes(answer.body.id, "stdout")
    expect(kept.length).toBe(1048575 + 6)
    expect(kept.subarray(1048575).toString("utf8")).toBe("étail")
    // max_output_bytes cuts what is kept; the answer says both.
    const small = await post("head -c 5000 /dev/zero | tr '\\0' b", { max_output_bytes: 100 })
    expect(small.body).toMatchObject({ output_truncated: true, output_capped: false, stdout: "b".repeat(100) })
  })

  it("a replay with the same key answers the same output", async () => {
    const key = idempotencyKey()
    const once = () => http.post(`/v1/sandboxes/${sandbox.id}/processes?wait_seconds=30`, { ...auth, body: { command: ["sh", "-c", "echo $$"] }, headers: { "idempotency-key": key } })
    const first = await once()
    const again = await once()
    expect(again.status).toBe(201)
    expect(again.body).toEqual(first.body)
  })
})

describe("extending a sandbox's lifetime", () => {
  const extend = (id: string, body: unknown) => http.post(`/v1/sandboxes/${id}/actions/extend`, { ...auth, body })
  const secondsLeft = (s: any) => (Date.parse(s.expires_at) - Date.now()) / 1000

  it("moves the deadline later or earlier, and the sandbox ends at the new one", async () => {
    const fresh = await createReadySandbox(http, auth)
    expect(secondsLeft(fresh)).toBeGreaterThan(3500) // the request's 3600 s, armed at ready
    const later = await extend(fresh.id, { runtime_timeout_seconds: 7200 })
    expect(later.status).toBe(200)
    expect(later.body).toMatchObject({ id: fresh.id, state: "ready" })
    expect(secondsLeft(later.body)).toBeGreaterThan(7100)
    expect((await http.get(`/v1/sandboxes/${fresh.id}`, auth)).body.expires_at).toBe(later.body.expires_at)
    // Earlier: the timeout that replaced the old one fires, with the request's action (destroy).
    const soon = await extend(fresh.id, { runtime_timeout_seconds: 1 })
    expect(secondsLeft(soon.body)).toBeLessThan(2)
    const ended = await poll(async () => (await http.get(`/v1/sandboxes/${fresh.id}`, auth)).body, (s) => s.state === "stopped", 20_000, 100)
    expect(ended).toMatchObject({ state_reason: "runtime_timeout", expires_at: null })
  })

  it("has no deadline while paused (409), and a fresh one after resume", async () => {
    const paused = await http.post(`/v1/sandboxes/${sandbox.id}/actions/pause`, auth)
    await waitOperation(http, auth, paused.body.operation.id)
    expect((await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body).toMatchObject({ state: "paused", expires_at: null })
    const refused = await extend(sandbox.id, { runtime_timeout_seconds: 60 })
    expectEnvelope(refused, 409, "invalid_sandbox_state")
    expect(refused.body.details).toMatchObject({ state: "paused" })
    const resumed = await http.post(`/v1/sandboxes/${sandbox.id}/actions/resume`, auth)
    await waitOperation(http, auth, resumed.body.operation.id)
    expect(secondsLeft((await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body)).toBeGreaterThan(3500)
  })

  it("refuses bad values and unknown sandboxes, changing nothing", async () => {
    const before = (await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body.expires_at
    for (const body of [{ runtime_timeout_seconds: 0 }, { runtime_timeout_seconds: 172_801 }, { runtime_timeout_seconds: "60" }, {}, { runtime_timeout_seconds: 60, extra: 1 }]) {
      expectEnvelope(await extend(sandbox.id, body), 422, "validation_error")
    }
    expect((await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body.expires_at).toBe(before)
    expectEnvelope(await extend("sbx_00000000000000000000000000", { runtime_timeout_seconds: 60 }), 404, "not_found")
  })

  it("moves E2B's own timer with it", async () => {
    const onE2b = await createReadySandbox(http, auth, minimalSandbox({ provider: "e2b" }))
    expect((await extend(onE2b.id, { runtime_timeout_seconds: 20_000 })).status).toBe(200)
    const emulator = path.join(server.dataDir, "emulators", "e2b")
    const port = fs.readFileSync(path.join(emulator, "port"), "utf8").trim()
    const apiKey = fs.readFileSync(path.join(emulator, "api-key"), "utf8").trim()
    const db = new Database(path.join(server.dataDir, "gateway.sqlite"), { readonly: true })
    const row = db.query("SELECT provider_resource FROM sandboxes WHERE id = ?").get(onE2b.id) as { provider_resource: string }
    db.close()
    const resourceId = JSON.parse(row.provider_resource).resourceId
    const endAt = await poll(
      async () => ((await (await fetch(`http://127.0.0.1:${port}/sandboxes/${resourceId}`, { headers: { "x-api-key": apiKey } })).json()) as any).endAt,
      (at: string) => Date.parse(at) - Date.now() > 20_000 * 1000,
      10_000,
      100
    )
    expect(Date.parse(endAt) - Date.now()).toBeLessThan((20_000 + 301) * 1000) // the gateway's deadline plus its margin
    await http.delete(`/v1/sandboxes/${onE2b.id}`, auth)
  })
})
