/**
 * E2B's official SDK against the E2B emulator (issue 25): its everyday flow (test/sdk/e2b.flow.ts) runs offline, in
 * a network namespace with only loopback up beside `sandbox-gateway emulate e2b` (test/support/offline.ts). Steps
 * the emulator cannot serve are skipped by name, with the reason (docs/providers.md, E2B). The same run drives the
 * emulator's `desktop` template with E2B's Desktop SDK (`@e2b/desktop`).
 */
import { describe, expect, it } from "vitest"
import { runSdkFlow } from "../support/offline.ts"

const stepsOf = (run: Awaited<ReturnType<typeof runSdkFlow>>) => run.report?.steps.map((s) => `${s.name}: ${s.status}${s.status === "failed" ? ` (${s.error})` : ""}`)

describe("e2b's SDK against the emulator, offline", () => {
  it("no request leaves the namespace: the emulator answers on loopback; the SDK at E2B's own hosts, a lookup and a fetch fail at once", async () => {
    const run = await runSdkFlow({ providers: ["e2b"], script: "test/sdk/offline-check.flow.ts", timeoutMs: 120_000 })
    expect(run.interfaces).toEqual(["lo"])
    expect(stepsOf(run), run.stderr).toEqual([
      "the emulator on loopback answers: passed",
      "resolving E2B's API host fails: passed",
      "fetching E2B's API fails: passed",
      "the SDK at its default hosts fails: passed"
    ])
    expect(run.status).toBe(0)
  }, 240_000)

  it("create, commands (exit codes, streamed output, background and kill, stdin), files (binary, > 1 MiB, gzip), user, info, list, pause and connect, kill; the Desktop SDK's screen, pointer, keyboard and screenshots", async () => {
    const run = await runSdkFlow({ providers: ["e2b"], script: "test/sdk/e2b.flow.ts" })
    expect(stepsOf(run), `${run.stderr}\n${run.emulateStderr}`).toEqual([
      "create: passed",
      "run a command: exit code, stdout, stderr: passed",
      "run a command with cwd and envs: passed",
      "stream output (onStdout, onStderr) as it is written: passed",
      "background command: listed, then killed: passed",
      "stdin: send input to a running command: passed",
      "files: write and read text: passed",
      "files: binary round trip (every byte value): passed",
      "files: more than 1 MiB, both upload kinds (multipart and octet-stream): passed",
      "files: gzip upload: passed",
      "files: list, stat, exists, remove: passed",
      "user: commands run as the default user; root is refused, never run as `user`: passed",
      "get info: passed",
      "list sandboxes (by metadata): passed",
      "pause, then connect resumes it: passed",
      "getMetrics: skipped",
      "getHost(port) traffic: skipped",
      "kill: passed",
      "desktop: create (the SDK starts Xvfb and the session): passed",
      "desktop: screen size, pointer moves and shows in a screenshot (scrot --pointer): passed",
      "desktop: clicks, typing and keys, scroll, drag: passed",
      "desktop: stream (live view): skipped",
      "desktop: open and launch: skipped",
      "desktop: windows (getApplicationWindows, getWindowTitle): skipped",
      "desktop: kill: passed"
    ])
    expect(run.status).toBe(0)
  }, 300_000)
})
