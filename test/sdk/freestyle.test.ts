/**
 * Freestyle's official SDK against the Freestyle emulator (issue 25): its everyday flow (test/sdk/freestyle.flow.ts)
 * runs offline, in a network namespace with only loopback up beside `sandbox-gateway emulate freestyle`
 * (test/support/offline.ts). Steps the emulator cannot serve are skipped by name, with the reason
 * (docs/providers.md, Freestyle).
 */
import { describe, expect, it } from "vitest"
import { runSdkFlow } from "../support/offline.ts"

const stepsOf = (run: Awaited<ReturnType<typeof runSdkFlow>>) => run.report?.steps.map((s) => `${s.name}: ${s.status}${s.status === "failed" ? ` (${s.error})` : ""}`)

describe("freestyle's SDK against the emulator, offline", () => {
  it("create, exec-await (exit codes, env, stdin, timeout), files (text, binary, ranges, > 1 MiB and resumable, list, stat, remove), get, list, pause and start, resize and update, delete", async () => {
    const run = await runSdkFlow({ providers: ["freestyle"], script: "test/sdk/freestyle.flow.ts" })
    expect(run.interfaces).toEqual(["lo"])
    expect(stepsOf(run), `${run.stdout}\n${run.stderr}\n${run.emulateStderr}`).toEqual([
      "create (slug, firewall, metadata): passed",
      "run a command: exit code, stdout, stderr: passed",
      "run a command with env, stdin and a timeout (a null status when it is killed): passed",
      "stream output: skipped",
      "background command and kill: skipped",
      "files: write and read text: passed",
      "files: binary round trip (every byte value), and a ranged read: passed",
      "files: more than 1 MiB, and past 8 MiB (the SDK's resumable upload): passed",
      "files: list, stat, exists, remove: passed",
      "get (by id and by slug): passed",
      "list VMs (by metadata): passed",
      "pause, then start: passed",
      "resize (upward) and update (metadata, ttl): passed",
      "snapshots, domains, TLS rules, private networks, identities, PTY: skipped",
      "delete: passed"
    ])
    expect(run.status).toBe(0)
  }, 300_000)
})
