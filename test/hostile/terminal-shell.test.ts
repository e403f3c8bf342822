/**
 * A Daytona terminal types its command into the sandbox's own login shell (providers/daytona/adapter/terminals.ts),
 * so the sandbox controls what that shell does before it reads the line. From inside a real sandbox (its
 * ~/.profile, which a login shell runs first), through the real gateway:
 * - a profile that floods output without end: the start fails within the adapter's 1 MiB bound (not an unbounded
 *   buffer, not a hang), the gateway's memory stays bounded, and the sandbox still serves other processes;
 * - a profile that prints a forged marker (any fixed text: the real one carries a nonce it cannot know) and then
 *   "output": nothing before the real marker reaches the process's output.
 */
import * as fs from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, readProcessOutput, runProcess, waitProcess } from "../support/sandbox.ts"
import { api, openGateway, type RunningServer } from "../support/server.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth
let sandbox: any

const rssKb = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${server.pid}/status`, "utf8"))?.[1] ?? 0)
const profile = (script: string) => runProcess(http, auth, sandbox.id, ["sh", "-c", `printf '%s\\n' "$1" > "$HOME/.profile"`, "sh", script])
const terminal = async (command: Array<string>) => {
  const started = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body: { command, pty: { cols: 80, rows: 24 } }, headers: { "idempotency-key": idempotencyKey("t") } })
  expect(started.status).toBe(202)
  return waitProcess(http, auth, sandbox.id, started.body.id, 90_000)
}

beforeAll(async () => {
  ;({ server, http, auth } = await openGateway("terminal-shell@example.com"))
  sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona", features: { pty: true } }))
}, 60_000)
afterAll(() => server.stop())

describe("a hostile login shell in front of a Daytona terminal", () => {
  it("a profile that floods output: the start fails at its bound, the gateway's memory stays bounded, the sandbox still works", async () => {
    await profile("while :; do echo flooding-the-terminal-before-any-line-is-read; done")
    const before = rssKb()
    let peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, rssKb())), 20)
    const ended = await terminal(["echo", "never-run"])
    clearInterval(sampler)
    expect(ended.state).toBe("failed")
    expect(ended.error).toMatchObject({ details: { reason: "terminal_not_started" } })
    expect(ended.error.message).toMatch(/^The terminal did not start the command: the sandbox's shell wrote more than \d+ bytes/)
    expect((await readProcessOutput(http, auth, sandbox.id, ended.id)).stdout).not.toContain("never-run")
    expect(peak - before).toBeLessThan(128 * 1024)
    await profile("")
    expect((await runProcess(http, auth, sandbox.id, ["echo", "still-here"])).stdout).toBe("still-here\n")
  }, 120_000)

  it("a profile that forges a marker: only what the command itself writes is its output", async () => {
    await profile(`printf '%s\\n' 'metal-000000000000000000_ready' 'FORGED-OUTPUT'`)
    const ended = await terminal(["echo", "the-real-command"])
    expect(ended.state).toBe("succeeded")
    const output = (await readProcessOutput(http, auth, sandbox.id, ended.id)).stdout
    expect(output).toContain("the-real-command")
    expect(output).not.toContain("FORGED-OUTPUT")
    await profile("")
  }, 120_000)
})
