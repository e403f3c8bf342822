/**
 * CodeSandbox's official SDK against the CodeSandbox emulator (issue 25), lifecycle only: its flow
 * (test/sdk/codesandbox.flow.ts) runs offline, in a network namespace with only loopback up beside
 * `sandbox-gateway emulate codesandbox` (test/support/offline.ts). What the emulator cannot serve is skipped by
 * name, with the reason (docs/providers.md, CodeSandbox).
 */
import { describe, expect, it } from "vitest"
import { runSdkFlow } from "../support/offline.ts"

const stepsOf = (run: Awaited<ReturnType<typeof runSdkFlow>>) => run.report?.steps.map((s) => `${s.name}: ${s.status}${s.status === "failed" ? ` (${s.error})` : ""}`)

describe("codesandbox's SDK against the emulator, offline", () => {
  it("create, get, list and the running VMs, hibernate and resume, shutdown and resume, delete", async () => {
    const run = await runSdkFlow({ providers: ["codesandbox"], script: "test/sdk/codesandbox.flow.ts" })
    expect(run.interfaces).toEqual(["lo"])
    expect(stepsOf(run), `${run.stdout}\n${run.stderr}\n${run.emulateStderr}`).toEqual([
      "create (fork of the default template, then start): passed",
      "the first boot is the fork's: passed",
      "get: passed",
      "list (by tag) and the running VMs: passed",
      "hibernate, then resume (from the hibernation): passed",
      "shutdown, then resume (a clean boot): passed",
      "connect: commands, files, ports, terminals: skipped",
      "hosts and preview tokens: skipped",
      "delete: passed"
    ])
    expect(run.status).toBe(0)
  }, 300_000)
})
