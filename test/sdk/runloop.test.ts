/**
 * Runloop's official SDK against the Runloop emulator (issue 25): its everyday flow (test/sdk/runloop.flow.ts) runs
 * offline, in a network namespace with only loopback up beside `sandbox-gateway emulate runloop`
 * (test/support/offline.ts). Steps the emulator cannot serve are skipped by name, with the reason
 * (docs/providers.md, Runloop).
 */
import { describe, expect, it } from "vitest"
import { runSdkFlow } from "../support/offline.ts"

const stepsOf = (run: Awaited<ReturnType<typeof runSdkFlow>>) => run.report?.steps.map((s) => `${s.name}: ${s.status}${s.status === "failed" ? ` (${s.error})` : ""}`)

describe("runloop's SDK against the emulator, offline", () => {
  it("create, commands (exit codes, long output, awaited, streamed, background and kill), files (text, binary, > 1 MiB, list and delete), info, list, suspend and resume, shutdown", async () => {
    const run = await runSdkFlow({ providers: ["runloop"], script: "test/sdk/runloop.flow.ts" })
    expect(run.interfaces).toEqual(["lo"])
    expect(stepsOf(run), `${run.stdout}\n${run.stderr}\n${run.emulateStderr}`).toEqual([
      "create (create_and_await_running): passed",
      "run a command: exit code, stdout, stderr: passed",
      "a long output: the last lines come with the answer, the whole from the stream: passed",
      "a command that outlasts execute's optimistic wait is awaited (wait_for_status): passed",
      "stream output (stdout, stderr callbacks) as it is written: passed",
      "background command: running, then killed: passed",
      "stdin (attach_stdin, send_std_in): skipped",
      "files: write and read text: passed",
      "files: binary round trip (every byte value), upload and download: passed",
      "files: more than 1 MiB: passed",
      "files: list and delete (through commands: Runloop's API has no listing or delete): passed",
      "get info: passed",
      "list devboxes: passed",
      "suspend, then resume: passed",
      "tunnels (net.enableTunnel) and SSH keys: skipped",
      "logs: skipped",
      "shutdown: passed"
    ])
    expect(run.status).toBe(0)
  }, 300_000)
})
