/**
 * The README walkthrough, over HTTP against a real server: bootstrap → routed create → ready → a failing
 * command with split output → binary file round trip → a web server reached through an endpoint URL →
 * pause → resume → delete → stopped.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Bootstrap, bootstrap, type RunningServer, startServer } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, poll, runProcess, waitOperation, waitRuntimeOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let boot: Bootstrap
let auth: KeyAuth

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  boot = await bootstrap(server.dataDir, "walkthrough@example.com")
  auth = { token: boot.api_key, project: boot.project_id }
})
afterAll(() => server.stop())

describe("walkthrough", () => {
  it("runs a sandbox end to end", async () => {
    // As step 2: no provider, the port it will serve named as a feature.
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ features: { public_ports: [8000], pause_resume: true } }))
    expect(sandbox.state).toBe("ready")
    expect(typeof sandbox.provider).toBe("string") // routed: no provider was given
    expect(sandbox.billing_mode).toBe("emulated")

    const run = await runProcess(http, auth, sandbox.id, ["sh", "-c", "echo hi; echo err >&2; exit 3"])
    expect(run.process.state).toBe("failed")
    expect(run.process.exit_code).toBe(3)
    expect(run.process.error.code).toBe("process_exit_nonzero")
    expect(run.stdout).toBe("hi\n")
    expect(run.stderr).toBe("err\n")

    const bytes = new Uint8Array(256 * 4).map((_, i) => i % 256)
    const write = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/write`, {
      ...auth,
      body: { path: "/workspace/data/blob.bin", data_base64: Buffer.from(bytes).toString("base64"), create_parents: true },
      headers: { "idempotency-key": idempotencyKey("write") }
    })
    expect(write.status).toBe(202)
    expect((await waitRuntimeOperation(http, auth, sandbox.id, write.body.id)).state).toBe("succeeded")
    const read = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/read`, { ...auth, body: { path: "/workspace/data/blob.bin" } })
    const readDone = await waitRuntimeOperation(http, auth, sandbox.id, read.body.id)
    expect(Buffer.from(readDone.result.data_base64, "base64").equals(Buffer.from(bytes))).toBe(true)
    expect(readDone.result.eof).toBe(true)
    const list = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/list`, { ...auth, body: { path: "/workspace/data" } })
    const listed = await waitRuntimeOperation(http, auth, sandbox.id, list.body.id)
    expect(listed.result.entries.map((e: any) => e.path)).toContain("/workspace/data/blob.bin")
    const del = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/delete`, { ...auth, body: { path: "/workspace/data/blob.bin" } })
    expect((await waitRuntimeOperation(http, auth, sandbox.id, del.body.id)).result.deleted).toBe(true)

    const serverProcess = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, {
      ...auth,
      body: { command: ["python3", "-m", "http.server", "8000"], timeout_seconds: 600 },
      headers: { "idempotency-key": idempotencyKey("srv") }
    })
    expect(serverProcess.status).toBe(202)
    const endpoint = await http.post(`/v1/sandboxes/${sandbox.id}/endpoints`, {
      ...auth,
      body: { port: 8000 },
      headers: { "idempotency-key": idempotencyKey("ep") }
    })
    expect(endpoint.status).toBe(202)
    const active = await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}/endpoints`, auth)).body.endpoints[0], (e) => e?.state === "active")
    const page = await poll(async () => {
      const res = await fetch(active.url).catch(() => undefined)
      return res === undefined ? undefined : { status: res.status, text: await res.text() }
    }, (r) => r?.status === 200, 20_000, 100)
    expect(page?.text).toContain("Directory listing")

    const paused = await http.post(`/v1/sandboxes/${sandbox.id}/actions/pause`, auth)
    expect(paused.status).toBe(202)
    expect((await waitOperation(http, auth, paused.body.operation.id)).state).toBe("succeeded")
    expect((await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body.state).toBe("paused")
    const resumed = await http.post(`/v1/sandboxes/${sandbox.id}/actions/resume`, auth)
    expect((await waitOperation(http, auth, resumed.body.operation.id)).state).toBe("succeeded")
    expect((await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body.state).toBe("ready")

    const deleted = await http.delete(`/v1/sandboxes/${sandbox.id}`, auth)
    expect(deleted.status).toBe(202)
    expect((await waitOperation(http, auth, deleted.body.operation.id)).state).toBe("succeeded")
    const final = (await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body
    expect(final.state).toBe("stopped")
    expect(final.stopped_at).not.toBeNull()
    // The endpoint stopped serving with the sandbox.
    expect((await fetch(active.url)).status).toBe(410)
  })
})
