/**
 * Northflank's official client against the Northflank emulator (issue 25), lifecycle only: its flow
 * (test/sdk/northflank.flow.ts) runs offline, in a network namespace with only loopback up beside
 * `sandbox-gateway emulate northflank` (test/support/offline.ts). What the emulator cannot serve is skipped by name,
 * with the reason (docs/providers.md, Northflank).
 */
import { describe, expect, it } from "vitest"
import { runSdkFlow } from "../support/offline.ts"

const stepsOf = (run: Awaited<ReturnType<typeof runSdkFlow>>) => run.report?.steps.map((s) => `${s.name}: ${s.status}${s.status === "failed" ? ` (${s.error})` : ""}`)

describe("northflank's client against the emulator, offline", () => {
  it("create a deployment service, get, list, pause and resume, scale, delete", async () => {
    const run = await runSdkFlow({ providers: ["northflank"], script: "test/sdk/northflank.flow.ts" })
    expect(run.interfaces).toEqual(["lo"])
    expect(stepsOf(run), `${run.stdout}\n${run.stderr}\n${run.emulateStderr}`).toEqual([
      "create a deployment service (an external image, one instance): passed",
      "get: passed",
      "list services: passed",
      "pause, then resume: passed",
      "scale to 0 and back to 1: passed",
      "exec, port forwarding, file copy, logs, metrics: skipped",
      "builds, ports and domains, volumes, addons, jobs: skipped",
      "delete: passed"
    ])
    expect(run.status).toBe(0)
  }, 300_000)
})
