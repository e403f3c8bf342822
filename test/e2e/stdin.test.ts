/**
 * Standard input (issue 13, item 3) through the real gateway: a process started with `"stdin": true` on a provider
 * that takes input (E2B's envd, Daytona's session command input, on their emulators) reads what `POST …/stdin`
 * writes, in order, until `eof`; every wrong use is refused in the envelope, and a provider without input (Vercel)
 * is refused before anything starts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, readProcessOutput, waitProcess } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth
let e2b: any
let daytona: any
let vercel: any

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
  ;[e2b, daytona, vercel] = await Promise.all(["e2b", "daytona", "vercel"].map((provider) => createReadySandbox(http, auth, minimalSandbox({ provider }))))
})
afterAll(() => server.stop())

describe("stdin", () => {
  it.each([["e2b", () => e2b], ["daytona", () => daytona]] as const)("a process reads what is written, in order, until eof (%s)", async (_name, sandboxOf) => {
    const sandbox = sandboxOf()
    const started = await start(sandbox.id, { command: ["sh", "-c", "cat; echo done"], stdin: true })
    expect(started.status).toBe(202)
    expect(started.body).toMatchObject({ stdin: true, stdin_closed_at: null })
    const lines = Array.from({ length: 20 }, (_, i) => `line ${i}\n`)
    for (const line of lines) {
      const res = await write(sandbox.id, started.body.id, { data_base64: b64(line) })
      expect(res.status).toBe(202)
      expect(res.body).toEqual({ process_id: started.body.id, bytes_written: line.length, eof: false })
    }
    expect((await write(sandbox.id, started.body.id, { data_base64: b64("last"), eof: true })).body).toMatchObject({ eof: true })
    const done = await waitProcess(http, auth, sandbox.id, started.body.id)
    expect(done).toMatchObject({ state: "succeeded", exit_code: 0, stdin: true })
    expect(done.stdin_closed_at).not.toBeNull()
    expect((await readProcessOutput(http, auth, sandbox.id, started.body.id)).stdout).toBe(`${lines.join("")}lastdone\n`)
  }, 60_000)

  it("Daytona: every byte value goes through as written, and a process that stops reading ends (its input closed)", async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i))
    const started = await start(daytona.id, { command: ["sh", "-c", "head -c 256 | od -An -tx1 | tr -d ' \\n'"], stdin: true })
    expect((await write(daytona.id, started.body.id, { data_base64: bytes.toString("base64") })).status).toBe(202)
    const done = await waitProcess(http, auth, daytona.id, started.body.id)
    expect(done).toMatchObject({ state: "succeeded", exit_code: 0 })
    expect((await readProcessOutput(http, auth, daytona.id, started.body.id)).stdout).toBe(bytes.toString("hex"))
    expectEnvelope(await write(daytona.id, started.body.id, { data_base64: b64("late") }), 409, "invalid_process_state")
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
    const refused = await start(vercel.id, { command: ["cat"], stdin: true })
    expectEnvelope(refused, 409, "capability_unsupported")
    // It names the providers that take input (a create could have named one of them).
    expect(refused.body.details).toMatchObject({ provider: "vercel" })
    expect(refused.body.details.providers).toEqual(expect.arrayContaining(["e2b", "daytona"]))
    expect(refused.body.message).toMatch(/^vercel sandboxes cannot take standard input; create the sandbox with provider set to one that can \(.*e2b.*\)$/)
  }, 60_000)

  it("without stdin, a command reads end-of-file at once and ends (Daytona: its session command reads /dev/null)", async () => {
    const plain = await start(daytona.id, { command: ["cat"] })
    expect((await waitProcess(http, auth, daytona.id, plain.body.id)).state).toBe("succeeded")
  }, 60_000)
})
