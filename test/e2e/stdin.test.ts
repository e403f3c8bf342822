/**
 * Standard input (issue 13, item 3) through the real gateway: a process started with `"stdin": true` on a provider
 * that takes input (E2B's envd, on its emulator) reads what `POST …/stdin` writes, in order, until `eof`; every
 * wrong use is refused in the envelope, and a provider without input (Daytona) is refused before anything starts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, readProcessOutput, waitProcess } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth
let e2b: any
let daytona: any

const start = (sandboxId: string, body: Record<string, unknown>, query = "") =>
  http.post(`/v1/sandboxes/${sandboxId}/processes${query}`, { ...auth, body, headers: { "idempotency-key": idempotencyKey("p") } })
const write = (sandboxId: string, processId: string, body: Record<string, unknown>, a: KeyAuth = auth) =>
  http.post(`/v1/sandboxes/${sandboxId}/processes/${processId}/stdin`, { ...a, body })
const b64 = (text: string) => Buffer.from(text).toString("base64")

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  const owner = await bootstrap(server.dataDir, "stdin@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
  ;[e2b, daytona] = await Promise.all([createReadySandbox(http, auth, minimalSandbox({ provider: "e2b" })), createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))])
})
afterAll(() => server.stop())

describe("stdin", () => {
  it("a process reads what is written, in order, until eof", async () => {
    const started = await start(e2b.id, { command: ["sh", "-c", "cat; echo done"], stdin: true })
    expect(started.status).toBe(202)
    expect(started.body).toMatchObject({ stdin: true, stdin_closed_at: null })
    const lines = Array.from({ length: 20 }, (_, i) => `line ${i}\n`)
    for (const line of lines) {
      const res = await write(e2b.id, started.body.id, { data_base64: b64(line) })
      expect(res.status).toBe(202)
      expect(res.body).toEqual({ process_id: started.body.id, bytes_written: line.length, eof: false })
    }
    expect((await write(e2b.id, started.body.id, { data_base64: b64("last"), eof: true })).body).toMatchObject({ eof: true })
    const done = await waitProcess(http, auth, e2b.id, started.body.id)
    expect(done).toMatchObject({ state: "succeeded", exit_code: 0, stdin: true })
    expect(done.stdin_closed_at).not.toBeNull()
    expect((await readProcessOutput(http, auth, e2b.id, started.body.id)).stdout).toBe(`${lines.join("")}lastdone\n`)
  }, 60_000)

  it("refuses writes after eof, to an ended process, and to a process not started with stdin", async () => {
    const open = await start(e2b.id, { command: ["cat"], stdin: true })
    await write(e2b.id, open.body.id, { eof: true })
    expectEnvelope(await write(e2b.id, open.body.id, { data_base64: b64("late") }), 409, "invalid_process_state")
    await waitProcess(http, auth, e2b.id, open.body.id)
    expectEnvelope(await write(e2b.id, open.body.id, { data_base64: b64("later") }), 409, "invalid_process_state")

    const plain = await start(e2b.id, { command: ["sleep", "5"] })
    expectEnvelope(await write(e2b.id, plain.body.id, { data_base64: b64("x") }), 409, "invalid_process_state")
    await http.post(`/v1/sandboxes/${e2b.id}/processes/${plain.body.id}/actions/cancel`, auth)
  }, 60_000)

  it("validates the body, the ids and the tenant; no ?wait_seconds with stdin", async () => {
    const open = await start(e2b.id, { command: ["cat"], stdin: true })
    expectEnvelope(await write(e2b.id, open.body.id, { data_base64: Buffer.alloc(1024 * 1024 + 1).toString("base64") }), 422, "validation_error")
    expectEnvelope(await write(e2b.id, open.body.id, { data_base64: "not base64!" }), 422, "validation_error")
    expectEnvelope(await write(e2b.id, open.body.id, { data_base64: b64("x"), eof: "yes" }), 422, "validation_error")
    expectEnvelope(await write(e2b.id, open.body.id, { data_base64: b64("x"), extra: 1 }), 422, "validation_error")
    // Exactly 1 MiB is fine.
    expect((await write(e2b.id, open.body.id, { data_base64: Buffer.alloc(1024 * 1024, 97).toString("base64") })).status).toBe(202)
    expectEnvelope(await write(e2b.id, "proc_00000000000000000000000000", { data_base64: b64("x") }), 404, "not_found")
    const stranger = await bootstrap(server.dataDir, "stranger-stdin@example.com")
    expectEnvelope(await write(e2b.id, open.body.id, { data_base64: b64("x") }, { token: stranger.api_key, project: stranger.project_id }), 404, "not_found")
    expectEnvelope(await start(e2b.id, { command: ["cat"], stdin: true }, "?wait_seconds=5"), 422, "validation_error")
    await write(e2b.id, open.body.id, { eof: true })
    await waitProcess(http, auth, e2b.id, open.body.id)
  }, 60_000)

  it("a provider that cannot take input refuses such a process before starting anything", async () => {
    const refused = await start(daytona.id, { command: ["cat"], stdin: true })
    expectEnvelope(refused, 409, "capability_unsupported")
    // It names the providers that take input (a create could have named one of them).
    expect(refused.body.details).toMatchObject({ provider: "daytona" })
    expect(refused.body.details.providers).toContain("e2b")
    expect(refused.body.message).toMatch(/^daytona sandboxes cannot take standard input; create the sandbox with provider set to one that can \(.*e2b.*\)$/)
    // Without stdin, the same command reads end-of-file at once and ends.
    const plain = await start(daytona.id, { command: ["cat"] })
    expect((await waitProcess(http, auth, daytona.id, plain.body.id)).state).toBe("succeeded")
  }, 60_000)
})
