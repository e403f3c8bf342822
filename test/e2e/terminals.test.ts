/**
 * Terminals (issue 13, item 5) through the real gateway, on both providers with terminals and their emulators —
 * E2B (envd's pty) and Daytona (PTY sessions, the command typed into their shell) — each over a real
 * pseudo-terminal in the jail: interactive programs through `…/attach` (a prompt arrives, a typed line is
 * answered, a resize changes `stty size`), closing an attach leaves the process running, a second attach takes
 * over, the end of the process ends the attach with its exit code; every wrong use answers the API's envelope.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"
import { refusedUpgrade as rawRefusedUpgrade } from "../support/raw-http.ts"
import { attachTerminal, keyHeaders, shellRoundTrip } from "../support/terminals.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, poll, readProcessOutput, waitOperation, waitProcess } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth
let e2b: any
let daytona: any
/** A sandbox of a provider without terminals. */
let plainSandbox: any

const start = (sandboxId: string, body: Record<string, unknown>, query = "") =>
  http.post(`/v1/sandboxes/${sandboxId}/processes${query}`, { ...auth, body, headers: { "idempotency-key": idempotencyKey("t") } })
const terminalOn = (sandboxId: string, command: Array<string>) => start(sandboxId, { command, pty: { cols: 80, rows: 24 } })
const terminal = (command: Array<string>) => terminalOn(e2b.id, command)
const attach = (sandboxId: string, processId: string, a: KeyAuth = auth, query = "") => attachTerminal(server.url, sandboxId, processId, a, { query })
const refusedUpgrade = (sandboxId: string, processId: string, headers: Record<string, string>, query = "") =>
  rawRefusedUpgrade(server.url, `/v1/sandboxes/${sandboxId}/processes/${processId}/attach${query}`, headers)

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  const owner = await bootstrap(server.dataDir, "terminals@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
  // `features.pty` is routed to a provider with terminals (Daytona or E2B, whichever has the broader API).
  ;[daytona, e2b, plainSandbox] = await Promise.all([
    createReadySandbox(http, auth, minimalSandbox({ provider: "daytona", features: { pty: true } })),
    createReadySandbox(http, auth, minimalSandbox({ provider: "e2b", features: { pty: true } })),
    createReadySandbox(http, auth, minimalSandbox({ provider: "modal" }))
  ])
})
afterAll(() => server.stop())

describe("terminals", () => {
  it("features.pty is placed on a provider with terminals, and fails where there is none", async () => {
    expect(daytona.provider).toBe("daytona")
    expect(e2b.provider).toBe("e2b")
    const routed = await createReadySandbox(http, auth, minimalSandbox({ features: { pty: true } }))
    expect(["daytona", "e2b"]).toContain(routed.provider)
    const refused = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider: "modal", features: { pty: true } }), headers: { "idempotency-key": idempotencyKey("c") } })
    expect(refused.status).toBe(202)
    const op = await waitOperation(http, auth, refused.body.operation.id)
    expect(op).toMatchObject({ state: "failed", error: { code: "no_eligible_provider" } })
    expect(JSON.stringify(op.error)).toContain("offers no terminals")
  })

  describe.each([["e2b"], ["daytona"]])("on %s", (name) => {
    const sb = () => (name === "e2b" ? e2b : daytona)
    it("an interactive shell: a prompt, a typed line answered, a resize seen by stty, exit ends the attach", async () => {
      const started = await terminalOn(sb().id, ["sh", "-i"])
      expect(started.status).toBe(202)
      expect(started.body).toMatchObject({ pty: { cols: 80, rows: 24 }, stdin: true })
      const t = attach(sb().id, started.body.id)
      await shellRoundTrip(t)
      expect((await http.get(`/v1/sandboxes/${sb().id}/processes/${started.body.id}`, auth)).body.pty).toEqual({ cols: 120, rows: 40 })
      t.type("exit 3\n")
      await t.waitFrame("exit")
      await t.waitClose()
      expect(t.state.frames.find((f) => f.type === "exit")).toEqual({ type: "exit", state: "failed", exit_code: 3 })
      expect(t.state.closed?.code).toBe(1000)
      // The output is stored as for every process.
      expect((await readProcessOutput(http, auth, sb().id, started.body.id)).stdout).toContain("sum=42")
    }, 60_000)

    it("python3 -i: its prompt arrives and a typed expression is answered", async () => {
      const started = await terminalOn(sb().id, ["python3", "-i", "-q"])
      const t = attach(sb().id, started.body.id)
      await t.opened
      await t.waitOutput(">>> ")
      t.type("print(6 * 7)\n")
      await t.waitOutput(/print\(6 \* 7\)\r\n42\r\n/)
      t.type("\x04") // ^D at the prompt ends python
      await t.waitClose()
      expect((await waitProcess(http, auth, sb().id, started.body.id)).state).toBe("succeeded")
    }, 60_000)

    it("closing an attach leaves the process running; a new attach replays the output; a second attach takes over", async () => {
      const started = await terminalOn(sb().id, ["sh", "-i"])
      const first = attach(sb().id, started.body.id)
      await first.opened
      first.type("echo marker-one\n")
      await first.waitOutput(/marker-one\r\n/)
      first.ws.close()
      await first.waitClose()
      await Bun.sleep(200)
      expect((await http.get(`/v1/sandboxes/${sb().id}/processes/${started.body.id}`, auth)).body.state).toBe("running")

      const second = attach(sb().id, started.body.id)
      await second.opened
      await second.waitOutput(/marker-one\r\n/) // replayed from the start
      const third = attach(sb().id, started.body.id)
      await third.opened
      await second.waitClose()
      expect(second.state.closed?.code).toBe(4000)
      third.type("echo marker-two\n")
      await third.waitOutput("marker-two")
      expect(second.state.output).not.toContain("marker-two")
      // Typing through …/stdin reaches the same terminal.
      const typed = await http.post(`/v1/sandboxes/${sb().id}/processes/${started.body.id}/stdin`, { ...auth, body: { data_base64: Buffer.from("echo via-stdin\n").toString("base64") } })
      expect(typed.status).toBe(202)
      await third.waitOutput(/via-stdin\r\n/)
      // eof types ^D: the shell ends; the terminal was never "closed" for more writes before that.
      await http.post(`/v1/sandboxes/${sb().id}/processes/${started.body.id}/stdin`, { ...auth, body: { eof: true } })
      await third.waitClose()
      expect((await waitProcess(http, auth, sb().id, started.body.id)).state).toBe("succeeded")
    }, 60_000)

    it("?after replays only what came after that event", async () => {
      const started = await terminalOn(sb().id, ["sh", "-c", "echo early; read x; echo late-$x"])
      const t = attach(sb().id, started.body.id)
      await t.opened
      await t.waitOutput("early")
      const events = (await http.get(`/v1/sandboxes/${sb().id}/processes/${started.body.id}/events`, auth)).text
      const last = Math.max(...[...events.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])))
      t.ws.close()
      const later = attach(sb().id, started.body.id, auth, `?after=${last}`)
      await later.opened
      later.type("go\n")
      await later.waitOutput("late-go")
      expect(later.state.output).not.toContain("early")
      await later.waitClose()
    }, 60_000)

    it("bad frames: a malformed text frame is answered with an error frame, an oversized input frame closes with 1009", async () => {
      const started = await terminalOn(sb().id, ["sh", "-i"])
      const t = attach(sb().id, started.body.id)
      await t.opened
      await t.waitOutput("$ ") // started: the frames below reach a running process
      t.ws.send("{\"type\":\"resize\",\"cols\":0,\"rows\":24}")
      t.ws.send("not json")
      await t.waitFrame("error")
      expect(t.state.frames.filter((f) => f.type === "error").every((f) => f.code === "validation_error")).toBe(true)
      t.ws.send(new Uint8Array(1024 * 1024 + 1))
      await t.waitClose()
      expect(t.state.closed?.code).toBe(1009)
      // The process is untouched by either (it may still be starting: an attach does not wait for that).
      const state = await poll(async () => (await http.get(`/v1/sandboxes/${sb().id}/processes/${started.body.id}`, auth)).body.state, (s) => s !== "queued")
      expect(state).toBe("running")
      await http.post(`/v1/sandboxes/${sb().id}/processes/${started.body.id}/actions/cancel`, auth)
    }, 60_000)
  })

  it("refuses what cannot be attached, in the API's envelope", async () => {
    const live = await terminal(["sh", "-i"])
    const plain = await start(e2b.id, { command: ["sleep", "30"] })
    // Without the upgrade: 426.
    expectEnvelope(await http.get(`/v1/sandboxes/${e2b.id}/processes/${live.body.id}/attach`, auth), 426, "upgrade_required")
    // Credentials, tenant, ids, state and parameters, as the API checks them.
    expect((await refusedUpgrade(e2b.id, live.body.id, {})).status).toBe(401)
    const stranger = await bootstrap(server.dataDir, "stranger-terminals@example.com")
    const foreign = await refusedUpgrade(e2b.id, live.body.id, keyHeaders({ token: stranger.api_key, project: stranger.project_id }))
    expect(foreign).toMatchObject({ status: 404, body: { code: "not_found" } })
    expect((await refusedUpgrade(e2b.id, "proc_00000000000000000000000000", keyHeaders(auth))).body.code).toBe("not_found")
    const noTerminal = await refusedUpgrade(e2b.id, plain.body.id, keyHeaders(auth))
    expect(noTerminal).toMatchObject({ status: 409, body: { code: "invalid_process_state" } })
    expect((await refusedUpgrade(e2b.id, live.body.id, keyHeaders(auth), "?after=-1")).status).toBe(422)
    await http.post(`/v1/sandboxes/${e2b.id}/processes/${live.body.id}/actions/cancel`, auth)
    await waitProcess(http, auth, e2b.id, live.body.id)
    expect((await refusedUpgrade(e2b.id, live.body.id, keyHeaders(auth))).body.code).toBe("invalid_process_state")
    await http.post(`/v1/sandboxes/${e2b.id}/processes/${plain.body.id}/actions/cancel`, auth)
  }, 60_000)

  it("refuses a terminal where there is none, a bad size, and ?wait_seconds with a terminal", async () => {
    const refused = await start(plainSandbox.id, { command: ["sh"], pty: { cols: 80, rows: 24 } })
    expectEnvelope(refused, 409, "capability_unsupported")
    expect(refused.body.message).toContain("terminals")
    expectEnvelope(await start(e2b.id, { command: ["sh"], pty: { cols: 0, rows: 24 } }), 422, "validation_error")
    expectEnvelope(await start(e2b.id, { command: ["sh"], pty: { cols: 80, rows: 1001 } }), 422, "validation_error")
    expectEnvelope(await start(e2b.id, { command: ["sh"], pty: { cols: 80 } }), 422, "validation_error")
    expectEnvelope(await start(e2b.id, { command: ["sh"], pty: { cols: 80, rows: 24 } }, "?wait_seconds=5"), 422, "validation_error")
  })
})
