/**
 * Blaxel's official SDK against the Blaxel emulator (issue 25): its everyday flow (test/sdk/blaxel.flow.ts) runs
 * offline, in a network namespace with only loopback up beside `sandbox-gateway emulate blaxel`
 * (test/support/offline.ts). Steps the emulator cannot serve are skipped by name, with the reason
 * (docs/providers.md, Blaxel).
 */
import { describe, expect, it } from "vitest"
import { runSdkFlow } from "../support/offline.ts"

const stepsOf = (run: Awaited<ReturnType<typeof runSdkFlow>>) => run.report?.steps.map((s) => `${s.name}: ${s.status}${s.status === "failed" ? ` (${s.error})` : ""}`)

describe("blaxel's SDK against the emulator, offline", () => {
  it("create, processes (waited, streamed, background with live logs and kill, stdin), files (text, binary, > 1 MiB and multipart, list, remove), get, list, delete", async () => {
    const run = await runSdkFlow({ providers: ["blaxel"], script: "test/sdk/blaxel.flow.ts" })
    expect(run.interfaces).toEqual(["lo"])
    expect(stepsOf(run), `${run.stdout}\n${run.stderr}\n${run.emulateStderr}`).toEqual([
      "create (no name given; the SDK's spec.runtime.generation): passed",
      "run a command, waited for: exit code and output: passed",
      "run a command with workingDir and env: passed",
      "stream output (onStdout, onStderr) as it is written: passed",
      "background process: named, listed, its live logs, then killed: passed",
      "stdin: write to a running process, then close it: passed",
      "files: write and read text: passed",
      "files: binary round trip (every byte value): passed",
      "files: more than 1 MiB (a form upload), and past 5 MiB (the SDK's multipart upload): passed",
      "files: list, remove: passed",
      "get: passed",
      "list sandboxes: passed",
      "pause and resume: skipped",
      "sessions, snapshots, drives, schedules, codegen: skipped",
      "delete: passed"
    ])
    expect(run.status).toBe(0)
  }, 300_000)
})
