/**
 * Daytona's official SDK against the Daytona emulator (issue 25): its everyday flow (test/sdk/daytona.flow.ts) runs
 * offline, in a network namespace with only loopback up beside `sandbox-gateway emulate daytona`
 * (test/support/offline.ts). Steps the emulator cannot serve are skipped by name, with the reason
 * (docs/providers.md, Daytona).
 */
import { describe, expect, it } from "vitest"
import { runSdkFlow } from "../support/offline.ts"

const stepsOf = (run: Awaited<ReturnType<typeof runSdkFlow>>) => run.report?.steps.map((s) => `${s.name}: ${s.status}${s.status === "failed" ? ` (${s.error})` : ""}`)

describe("@daytonaio/sdk against the emulator, offline", () => {
  it("create, executeCommand, sessions (one shell, sync exit codes, streamed logs, background and delete, input), files (binary, > 1 MiB, bulk, streams, list, delete), a PTY, a signed preview, get, list, stop and start, delete", async () => {
    const run = await runSdkFlow({ providers: ["daytona"], script: "test/sdk/daytona.flow.ts" })
    expect(run.interfaces).toEqual(["lo"])
    expect(stepsOf(run), `${run.stderr}\n${run.emulateStderr}`).toEqual([
      "create: passed",
      "process.executeCommand: exit code and output: passed",
      "process.executeCommand with cwd, env and a timeout: passed",
      "a session is one shell: export and cd carry over, a command answers its exit code and output: passed",
      "an asynchronous session command streamed through its logs callback: passed",
      "a background command, then deleting its session kills it: passed",
      "stdin: input sent to a running session command (echoed, and not): passed",
      "files: upload and download text: passed",
      "files: binary round trip (every byte value): passed",
      "files: more than 1 MiB, in bulk and as streams: passed",
      "files: list, details, delete: passed",
      "a PTY session: typed input, resize, its exit code: passed",
      "getSignedPreviewUrl: a port of the sandbox served through it until expired: passed",
      "get: passed",
      "list (by labels): passed",
      "stop, then start: files stay: passed",
      "process.codeRun: skipped",
      "getMetrics: skipped",
      "getPreviewLink: skipped",
      "pause: skipped",
      "delete: passed"
    ])
    expect(run.status).toBe(0)
  }, 300_000)
})
