/**
 * Computer use against hostile sandboxes and tenants (issue 29), through the real API with real jails of the
 * Daytona emulator:
 *   - one sandbox cannot reach another's display: its /tmp/.X11-unix holds only its own socket, the abstract and
 *     TCP addresses of a display answer nothing, another sandbox's windows are not on its display, and its
 *     screenshots do not show them;
 *   - another project cannot read a sandbox's screenshots or recordings, nor act on its desktop (404);
 *   - an action flood is bounded: at most 32 actions and screenshots wait per sandbox (429 beyond), and another
 *     sandbox's screenshot is taken while the flood still waits;
 *   - a sandbox that replaces its agent and answers screenshots with 300 MiB, a GIF, or a PNG of another size than
 *     it claims gets no screenshot through, and the gateway's memory stays flat;
 *   - on E2B (whose desktop is driven by login-shell commands the sandbox can redefine), a fake scrot's 300 MiB file
 *     or GIF gets no screenshot through, and a fake xdotool's 1 MB of output is read only so far.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { diskPath, type JailState } from "../../src/runtime/Jail.ts"
import { changedPixels, decodePng } from "../support/png.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, poll, runProcess, waitProcess, waitRuntimeOperation } from "../support/sandbox.ts"
import { api, bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"
import { jailOfSandbox } from "../support/jails.ts"

const TAKEOVER = fs.readFileSync(path.join(import.meta.dirname, "fixtures", "takeover.js"))
const MAX_GROWTH = 100 * 1024 * 1024

let server: RunningServer
let http: ReturnType<typeof api>
let alice: KeyAuth
let bob: KeyAuth
let a: any
let b: any

const desktop = () => minimalSandbox({ provider: "daytona", features: { computer_use: true } })

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  const first = await bootstrap(server.dataDir, "alice-desktop@example.com")
  const second = await bootstrap(server.dataDir, "bob-desktop@example.com")
  alice = { token: first.api_key, project: first.project_id }
  bob = { token: second.api_key, project: second.project_id }
  ;[a, b] = await Promise.all([createReadySandbox(http, alice, desktop()), createReadySandbox(http, bob, desktop())])
}, 180_000)
afterAll(() => server.stop())

const act = (auth: KeyAuth, sandboxId: string, action: Record<string, unknown>) =>
  http.post(`/v1/sandboxes/${sandboxId}/computer/actions`, { ...auth, body: action, headers: { "idempotency-key": idempotencyKey("act") } })
const shoot = (auth: KeyAuth, sandboxId: string, body: Record<string, unknown> = {}) => http.post(`/v1/sandboxes/${sandboxId}/computer/screenshots`, { ...auth, body })
const screenshot = async (auth: KeyAuth, sandboxId: string) => {
  const started = await shoot(auth, sandboxId)
  expect(started.status, started.text).toBe(202)
  const op = await waitRuntimeOperation(http, auth, sandboxId, started.body.id, 120_000)
  expect(op.state, JSON.stringify(op.error)).toBe("succeeded")
  return decodePng(Buffer.from(op.result.data_base64, "base64"))
}

const jailOf = (sandboxId: string): JailState => jailOfSandbox(server.dataDir, sandboxId)

/** From inside a sandbox: tries to reach a display by its abstract socket and by TCP; prints what answered. */
const PROBE = `
import socket
for name, family, address in (("abstract", socket.AF_UNIX, "\\0/tmp/.X11-unix/X1"), ("tcp6001", socket.AF_INET, ("127.0.0.1", 6001)), ("tcp6000", socket.AF_INET, ("127.0.0.1", 6000))):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(address)
        print(name, "connected")
    except OSError:
        print(name, "refused")
    finally:
        s.close()
`

describe("computer use, hostile", () => {
  it("one sandbox cannot reach another's display, nor see its windows", async () => {
    // Alice's desktop shows an xterm, placed where Bob's desktop has nothing.
    const xterm = await http.post(`/v1/sandboxes/${a.id}/processes`, {
      ...alice,
      body: { command: ["xterm", "-geometry", "40x10+200+200", "-bg", "white", "-fa", "Monospace", "-fs", "12"], timeout_seconds: 3600 },
      headers: { "idempotency-key": idempotencyKey("xterm") }
    })
    await poll(() => runProcess(http, alice, a.id, ["sh", "-c", "xdotool search --onlyvisible --class xterm || true"]), (r) => r.stdout.trim() !== "", 60_000, 200).catch(async (e) => {
      console.log(JSON.stringify((await http.get(`/v1/sandboxes/${a.id}/processes/${xterm.body.id}`, alice)).body))
      throw e
    })
    const bobsBefore = await screenshot(bob, b.id)
    const alices = await screenshot(alice, a.id)
    expect(changedPixels(bobsBefore, alices, { x: 200, y: 200, width: 200, height: 100 })).toBeGreaterThan(1000)

    // Bob's sandbox: its own socket only; no display answers on an abstract socket or TCP; no xterm on its display.
    expect((await runProcess(http, bob, b.id, ["ls", "-a", "/tmp/.X11-unix"])).stdout.split("\n").filter((n) => n !== "" && n !== "." && n !== "..")).toEqual(["X1"])
    const probe = await runProcess(http, bob, b.id, ["python3", "-c", PROBE])
    expect(probe.stdout).toBe("abstract refused\ntcp6001 refused\ntcp6000 refused\n")
    expect((await runProcess(http, bob, b.id, ["sh", "-c", "xdotool search --onlyvisible --class xterm || echo none"])).stdout.trim()).toBe("none")
    const bobsAfter = await screenshot(bob, b.id)
    expect(changedPixels(bobsBefore, bobsAfter, { x: 200, y: 200, width: 200, height: 100 })).toBe(0)
    // The X socket is in each jail's own disk, not in the host's /tmp.
    expect(fs.existsSync("/tmp/.X11-unix/X1") && fs.statSync("/tmp/.X11-unix/X1").uid === jailOf(a.id).hostUid).toBe(false)
    expect(fs.existsSync(diskPath(jailOf(a.id), "root", "tmp", ".X11-unix", "X1"))).toBe(true)
  }, 240_000)

  it("another project cannot read a sandbox's screenshots or recordings, nor act on its desktop", async () => {
    const shot = await shoot(alice, a.id)
    const rec = await http.post(`/v1/sandboxes/${a.id}/recordings`, { ...alice, body: {}, headers: { "idempotency-key": idempotencyKey("rec") } })
    expect(rec.status).toBe(202)
    // The answers are the same as for a sandbox that does not exist.
    expectEnvelope(await http.get(`/v1/sandboxes/${a.id}/runtime-operations/${shot.body.id}`, bob), 404, "not_found")
    expectEnvelope(await http.get(`/v1/sandboxes/${a.id}/recordings`, bob), 404, "not_found")
    expectEnvelope(await http.get(`/v1/sandboxes/${a.id}/recordings/${rec.body.id}`, bob), 404, "not_found")
    expectEnvelope(await http.get(`/v1/sandboxes/${a.id}/recordings/${rec.body.id}/content`, bob), 404, "not_found")
    expectEnvelope(await http.post(`/v1/sandboxes/${a.id}/recordings/${rec.body.id}/actions/stop`, bob), 404, "not_found")
    expectEnvelope(await act(bob, a.id, { type: "keyboard_type", text: "intruder" }), 404, "not_found")
    expectEnvelope(await shoot(bob, a.id), 404, "not_found")
    // Bob's own sandbox with Alice's recording id: not found either.
    expectEnvelope(await http.get(`/v1/sandboxes/${b.id}/recordings/${rec.body.id}`, bob), 404, "not_found")
    await poll(() => http.get(`/v1/sandboxes/${a.id}/recordings/${rec.body.id}`, alice).then((r) => r.body), (r) => r.state === "recording", 60_000, 50)
    expect((await http.post(`/v1/sandboxes/${a.id}/recordings/${rec.body.id}/actions/stop`, alice)).status).toBe(202)
  }, 120_000)

  it("an action flood waits on its own sandbox, bounded; another sandbox's screenshot is taken meanwhile", async () => {
    // Each action types for a few seconds: the flood outlasts the test's other sandbox by far.
    const slow = { type: "keyboard_type", text: "z".repeat(100), delay_ms: 50 }
    const answers = await Promise.all(Array.from({ length: 40 }, () => act(alice, a.id, slow)))
    const accepted = answers.filter((r) => r.status === 202)
    const refused = answers.filter((r) => r.status === 429)
    expect(accepted.length + refused.length).toBe(40)
    expect(accepted.length).toBeLessThanOrEqual(32)
    expect(refused.length).toBeGreaterThanOrEqual(8)
    for (const r of refused) expectEnvelope(r, 429, "too_many_requests")
    expect(refused[0]!.body.retryable).toBe(true)
    // Screenshots count too.
    expectEnvelope(await shoot(alice, a.id), 429, "too_many_requests")

    await screenshot(bob, b.id)
    const states = await Promise.all(accepted.map((r) => http.get(`/v1/sandboxes/${a.id}/runtime-operations/${r.body.id}`, alice).then((x) => x.body.state)))
    expect(states.filter((s) => s === "queued" || s === "running").length).toBeGreaterThan(0)
    // Destroying the sandbox ends its flood: what waited fails with sandbox_stopped.
    expect((await http.delete(`/v1/sandboxes/${a.id}`, alice)).status).toBe(202)
    const last = await waitRuntimeOperation(http, alice, a.id, accepted.at(-1)!.body.id, 120_000)
    expect(last.state).toBe("failed")
    expect(last.error.code).toBe("sandbox_stopped")
  }, 240_000)

  it("a sandbox that fakes its screenshots gets none through, and the gateway's memory stays flat", async () => {
    const write = await http.post(`/v1/sandboxes/${b.id}/filesystem/write`, {
      ...bob,
      body: { path: "/workspace/takeover.js", data_base64: TAKEOVER.toString("base64") },
      headers: { "idempotency-key": idempotencyKey("w") }
    })
    expect((await waitRuntimeOperation(http, bob, b.id, write.body.id)).state).toBe("succeeded")
    fs.writeFileSync(diskPath(jailOf(b.id), "root", "workspace", "mode"), "shothuge")
    const started = await http.post(`/v1/sandboxes/${b.id}/processes`, {
      ...bob,
      body: {
        command: ["sh", "-c", `setsid -f sh -c 'touch /workspace/escaped; exec /opt/agent/bun /workspace/takeover.js fake' </dev/null >/workspace/takeover.log 2>&1
while [ ! -e /workspace/escaped ]; do sleep 0.02; done`]
      },
      headers: { "idempotency-key": idempotencyKey("p") }
    })
    await waitProcess(http, bob, b.id, started.body.id)
    await poll(() => Promise.resolve(fs.existsSync(diskPath(jailOf(b.id), "root", "workspace", "takeover-ready"))), (ready) => ready, 60_000, 50)

    const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${server.pid}/status`, "utf8"))?.[1] ?? NaN) * 1024
    for (const mode of ["shothuge", "shotgif", "shotlie"]) {
      fs.writeFileSync(diskPath(jailOf(b.id), "root", "workspace", "mode"), mode)
      const before = rss()
      let peak = before
      const sampler = setInterval(() => (peak = Math.max(peak, rss())), 5)
      const op = await waitRuntimeOperation(http, bob, b.id, (await shoot(bob, b.id)).body.id, 120_000)
      clearInterval(sampler)
      expect(op.state, mode).toBe("failed")
      expect(op.error.code, mode).toBe("computer_operation_failed")
      expect(op.result, mode).toBeNull()
      expect(peak - before, mode).toBeLessThan(MAX_GROWTH)
    }
  }, 240_000)

  it("on E2B, a sandbox whose login shell fakes scrot and xdotool gets no screenshot through, and the gateway's memory stays flat", async () => {
    // E2B's desktop is driven by `bash -l -c` commands: the sandbox's own login profile decides what they run.
    const e = await createReadySandbox(http, bob, minimalSandbox({ provider: "e2b", features: { computer_use: true } }))
    const profile = [
      'last() { for a; do :; done; printf %s "$a"; }',
      'scrot() { f=$(last "$@"); case $(cat /tmp/mode) in huge) truncate -s 300M "$f";; gif) printf "GIF89a%0100d" 0 > "$f";; esac; }',
      'xdotool() { case "$(cat /tmp/mode) $*" in chatty*getmouselocation*) head -c 1000000 /dev/zero | tr "\\0" x; echo " x:1 y:2";; *) command xdotool "$@";; esac; }'
    ].join("\n")
    const written = await runProcess(http, bob, e.id, ["sh", "-c", 'printf "%s\\n" "$0" > "$HOME/.bash_profile" && echo huge > /tmp/mode', profile])
    expect(written.process.exit_code, written.stderr).toBe(0)
    const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${server.pid}/status`, "utf8"))?.[1] ?? NaN) * 1024
    for (const mode of ["huge", "gif"]) {
      expect((await runProcess(http, bob, e.id, ["sh", "-c", `echo ${mode} > /tmp/mode`])).process.exit_code).toBe(0)
      const before = rss()
      let peak = before
      const sampler = setInterval(() => (peak = Math.max(peak, rss())), 5)
      const op = await waitRuntimeOperation(http, bob, e.id, (await shoot(bob, e.id)).body.id, 120_000)
      clearInterval(sampler)
      expect(op.state, mode).toBe("failed")
      expect(op.error.code, mode).toBe("computer_operation_failed")
      expect(op.result, mode).toBeNull()
      expect(peak - before, mode).toBeLessThan(MAX_GROWTH)
    }
    // 1 MB of pointer position: read only so far; the action still ends, with no position it could trust.
    expect((await runProcess(http, bob, e.id, ["sh", "-c", "echo chatty > /tmp/mode"])).process.exit_code).toBe(0)
    const moved = await waitRuntimeOperation(http, bob, e.id, (await act(bob, e.id, { type: "mouse_move", x: 5, y: 5 })).body.id, 120_000)
    expect(moved.state, JSON.stringify(moved.error)).toBe("succeeded")
    expect(moved.result.cursor_position).toBeNull()
  }, 240_000)
})
