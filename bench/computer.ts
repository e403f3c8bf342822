/**
 * Computer use (issue 29): a 1280×800 PNG screenshot's round trip and an action's (a mouse move), each through the
 * API (POST, then the runtime operation polled until it succeeded) and next to the same call made straight to the
 * local runtime's desktop (the agent's answer, no gateway in between). Targets: screenshot p50 ≤ 150 ms, action
 * p50 ≤ 30 ms. One sandbox on Daytona's emulator; an xterm on screen, so the image is not blank.
 */
import { Effect } from "effect"
import { makeLocalRuntime } from "../src/runtime/LocalRuntimeLive.ts"
import type { api } from "../test/support/server.ts"
import { createReadySandbox, idempotencyKey, minimalSandbox, poll, runProcess } from "../test/support/sandbox.ts"

type Http = ReturnType<typeof api>
type Stats = { readonly p50: number; readonly p90: number }
type Timer = (fn: () => Promise<unknown>) => Promise<Stats>

/** Polls a runtime operation until it ends (every 2 ms: the poll's own granularity must not dominate). */
const settle = async (http: Http, auth: { token: string; project: string }, sandboxId: string, id: string) => {
  for (;;) {
    const op = (await http.get(`/v1/sandboxes/${sandboxId}/runtime-operations/${id}`, auth)).body
    if (op.state !== "queued" && op.state !== "running") {
      if (op.state !== "succeeded") throw new Error(`${op.kind} ${op.state}: ${JSON.stringify(op.error)}`)
      return op
    }
    await Bun.sleep(2)
  }
}

export const benchComputer = async (http: Http, auth: { token: string; project: string }, dataDir: string, time: Timer) => {
  const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona", features: { computer_use: true } }))
  await http.post(`/v1/sandboxes/${sandbox.id}/processes`, {
    ...auth,
    body: { command: ["xterm", "-geometry", "80x24+40+40", "-fa", "Monospace", "-fs", "12"], timeout_seconds: 3600 },
    headers: { "idempotency-key": idempotencyKey("xterm") }
  })
  await poll(() => runProcess(http, auth, sandbox.id, ["sh", "-c", "xdotool search --onlyvisible --class xterm || true"]), (r) => r.stdout.trim() !== "", 60_000, 100)

  const screenshotApi = await time(async () => {
    const started = await http.post(`/v1/sandboxes/${sandbox.id}/computer/screenshots`, { ...auth, body: {} })
    const op = await settle(http, auth, sandbox.id, started.body.id)
    if (op.result.byte_length === 0) throw new Error("an empty screenshot")
  })
  let x = 0
  const actionApi = await time(async () => {
    x = (x + 7) % 1000
    const started = await http.post(`/v1/sandboxes/${sandbox.id}/computer/actions`, { ...auth, body: { type: "mouse_move", x, y: 300 }, headers: { "idempotency-key": idempotencyKey("move") } })
    await settle(http, auth, sandbox.id, started.body.id)
  })

  // The same calls straight to the runtime (the emulator's jail of this sandbox: its id is the resource's).
  const runtime = makeLocalRuntime(dataDir)
  const jail = (await Effect.runPromise(runtime.list)).find((s) => s.labels["metal.sandbox_id"] === sandbox.id)!.id
  const screenshotRuntime = await time(() => Effect.runPromise(runtime.screenshot(jail, { format: "png", showCursor: false })))
  const actionRuntime = await time(() => {
    x = (x + 7) % 1000
    return Effect.runPromise(runtime.desktopAction(jail, { type: "mouse_move", x, y: 300 }))
  })
  await Effect.runPromise(runtime.shutdown)
  await http.delete(`/v1/sandboxes/${sandbox.id}`, auth)
  return { screenshotApi, actionApi, screenshotRuntime, actionRuntime }
}
