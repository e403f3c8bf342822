/**
 * Vercel's official SDK against the Vercel emulator (issue 25): its everyday flow (test/sdk/vercel.flow.ts) runs
 * offline, in a network namespace with only loopback up beside `sandbox-gateway emulate vercel`
 * (test/support/offline.ts). Steps the emulator cannot serve are skipped by name, with the reason
 * (docs/providers.md, Vercel).
 */
import { describe, expect, it } from "vitest"
import { runSdkFlow } from "../support/offline.ts"

const stepsOf = (run: Awaited<ReturnType<typeof runSdkFlow>>) => run.report?.steps.map((s) => `${s.name}: ${s.status}${s.status === "failed" ? ` (${s.error})` : ""}`)

describe("vercel's SDK against the emulator, offline", () => {
  it("create, commands (exit codes, cwd and env, streamed, detached with logs and kill), files (text, binary, > 1 MiB, list, stat, remove), get, list, stop and delete", async () => {
    const run = await runSdkFlow({ providers: ["vercel"], script: "test/sdk/vercel.flow.ts" })
    expect(run.interfaces).toEqual(["lo"])
    expect(stepsOf(run), `${run.stdout}\n${run.stderr}\n${run.emulateStderr}`).toEqual([
      "create (POST /v3/sandboxes, no name given): passed",
      "run a command: exit code, stdout, stderr: passed",
      "run a command with cwd and env: passed",
      "stream output (stdout, stderr writables) as it is written: passed",
      "background command: detached, its logs, then killed: passed",
      "stdin and interactive terminals (openInteractive): skipped",
      "files: write and read text: passed",
      "files: binary round trip (every byte value): passed",
      "files: more than 1 MiB: passed",
      "files: list, stat, exists, remove (the SDK's fs, through commands): passed",
      "get by name: passed",
      "list sandboxes (by tag): passed",
      "pause and resume (persistent sandboxes, snapshots): skipped",
      "ports (domain(port)): skipped",
      "stop, then delete: passed"
    ])
    expect(run.status).toBe(0)
  }, 300_000)
})
