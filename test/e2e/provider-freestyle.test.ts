/**
 * Freestyle through the real gateway, on its emulator: a request for `provider: "freestyle"` becomes ready on the
 * base VM (2 vCPU, 4 GiB, 16 GiB, from the default snapshot), runs a command (buffered exec-await), round-trips a
 * binary file with its parents made, feeds a process its standard input (sent with the command at end-of-file),
 * pauses and resumes, reports its metrics and a rate-card cost, refuses endpoints, and is destroyed; a sandbox
 * without internet is a VM whose firewall allows nothing, so it has no network beyond its own loopback.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, expectEnvelope, type RunningServer, openGateway } from "../support/server.ts"
import { createReadySandbox, destroyAndExpectStopped, expectBinaryRoundTrip, expectNoEligibleProvider, idempotencyKey, type KeyAuth, minimalSandbox, poll, readProcessOutput, runProcess, waitOperation, waitProcess, waitRuntimeOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => void ({ server, http, auth } = await openGateway("freestyle@example.com")))
afterAll(() => server.stop())

describe("freestyle through the gateway", () => {
  it("ready on the base VM → echo hi → binary file → stdin → pause/resume → metrics and cost → no endpoints → destroy → stopped", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "freestyle", network: { internet_access: true } }))
    expect(sandbox).toMatchObject({ provider: "freestyle", state: "ready", billing_mode: "emulated" })
    expect(sandbox.resolved_resources).toMatchObject({ vcpu: 2, memory_mb: 4096, disk_mb: 16384, provider_size: "freestyle/ubuntu-sm" })

    const echo = await runProcess(http, auth, sandbox.id, ["sh", "-c", "echo hi; echo oops >&2; exit 4"], { cwd: "/workspace" })
    expect(echo.process).toMatchObject({ state: "failed", exit_code: 4 })
    expect(echo.stdout).toBe("hi\n")
    expect(echo.stderr).toBe("oops\n")

    await expectBinaryRoundTrip(http, auth, sandbox.id, "/workspace/data/bin.dat", { createParents: true })

    const fed = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body: { command: ["sh", "-c", "cat; echo done"], stdin: true }, headers: { "idempotency-key": idempotencyKey("s") } })
    expect(fed.status).toBe(202)
    for (const [data, eof] of [["one\n", false], ["two\n", true]] as const) {
      const res = await http.post(`/v1/sandboxes/${sandbox.id}/processes/${fed.body.id}/stdin`, { ...auth, body: { data_base64: Buffer.from(data).toString("base64"), eof } })
      expect(res.status).toBe(202)
    }
    expect((await waitProcess(http, auth, sandbox.id, fed.body.id)).state).toBe("succeeded")
    expect((await readProcessOutput(http, auth, sandbox.id, fed.body.id)).stdout).toBe("one\ntwo\ndone\n")

    const paused = await http.post(`/v1/sandboxes/${sandbox.id}/actions/pause`, { ...auth, headers: { "idempotency-key": idempotencyKey("p") } })
    expect((await waitOperation(http, auth, paused.body.operation.id)).state).toBe("succeeded")
    expect((await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body.state).toBe("paused")
    const resumed = await http.post(`/v1/sandboxes/${sandbox.id}/actions/resume`, { ...auth, headers: { "idempotency-key": idempotencyKey("r") } })
    expect((await waitOperation(http, auth, resumed.body.operation.id)).state).toBe("succeeded")
    expect((await runProcess(http, auth, sandbox.id, ["cat", "/workspace/data/bin.dat"])).process.state).toBe("succeeded")

    const metrics = await http.get(`/v1/sandboxes/${sandbox.id}/metrics`, auth)
    expect(metrics.body).toMatchObject({ provider: "freestyle", source: "local_runtime" })
    // 2 vCPU, 4 GiB and 16 GiB at the rate card: about 37 µUSD a second.
    const metered = await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}`, auth)).body, (x) => x.cost_microusd !== null, 20_000, 200)
    expect(BigInt(metered.cost_microusd)).toBeGreaterThan(0n)

    expectEnvelope(await http.post(`/v1/sandboxes/${sandbox.id}/endpoints`, { ...auth, body: { port: 8000 }, headers: { "idempotency-key": idempotencyKey("e") } }), 409, "capability_unsupported")

    await destroyAndExpectStopped(http, auth, sandbox.id)
  }, 120_000)

  it("a sandbox without internet is a VM with a closed firewall: no network beyond its loopback; a domain list is not placed there", async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "freestyle", network: { internet_access: false } }))
    expect(sandbox).toMatchObject({ provider: "freestyle", state: "ready" })
    const links = await runProcess(http, auth, sandbox.id, ["sh", "-c", "sed -n '3,$p' /proc/net/dev | cut -d: -f1 | tr -d ' '"])
    expect(links.stdout).toBe("lo\n")
    await destroyAndExpectStopped(http, auth, sandbox.id)
    await expectNoEligibleProvider(http, auth, minimalSandbox({ provider: "freestyle", network: { internet_access: true, allow_domains: ["example.com"] } }))
  }, 120_000)
})
