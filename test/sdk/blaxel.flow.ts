/**
 * Blaxel's official SDK (`@blaxel/core`, pinned in package.json) through its everyday flow against the Blaxel
 * emulator, offline (test/support/offline.ts runs it; test/sdk/blaxel.test.ts checks its report). The SDK is pointed
 * at the emulator only by the environment `emulate` prints for it (BL_API_URL, BL_API_KEY, BL_WORKSPACE, and
 * BL_DISABLE_H2: the emulator serves HTTP/1.1); each sandbox's runtime is at the `metadata.url` the emulator gives.
 */
import assert from "node:assert/strict"
import { SandboxInstance } from "@blaxel/core"
import { runFlow } from "./flow.ts"

const LABELS = { suite: "sdk-contract", run: String(process.pid) }

await runFlow(async ({ step, skip }) => {
  const sandbox = await step("create (no name given; the SDK's spec.runtime.generation)", () => SandboxInstance.create({ labels: LABELS, memory: 2048 }))

  await step("run a command, waited for: exit code and output", async () => {
    const ok = await sandbox.process.exec({ command: "echo hello; echo warn >&2", waitForCompletion: true })
    assert.equal(ok.status, "completed")
    assert.equal(ok.exitCode, 0)
    assert.equal(ok.stdout, "hello\n")
    assert.equal(ok.stderr, "warn\n")
    const failed = await sandbox.process.exec({ command: "echo out; exit 3", waitForCompletion: true })
    assert.equal(failed.status, "failed")
    assert.equal(failed.exitCode, 3)
    assert.equal(failed.logs, "out\n")
  })

  await step("run a command with workingDir and env", async () => {
    await sandbox.fs.mkdir("/tmp/flow-cwd")
    const run = await sandbox.process.exec({ command: "pwd; echo $GREETING", workingDir: "/tmp/flow-cwd", env: { GREETING: "hi there" }, waitForCompletion: true })
    assert.equal(run.stdout, "/tmp/flow-cwd\nhi there\n")
  })

  await step("stream output (onStdout, onStderr) as it is written", async () => {
    const lines: Array<string> = []
    const errors: Array<string> = []
    const run = await sandbox.process.exec({
      command: "for i in 1 2 3; do echo line$i; sleep 0.3; done; echo done >&2",
      waitForCompletion: true,
      onStdout: (line) => void lines.push(line),
      onStderr: (line) => void errors.push(line)
    })
    assert.deepEqual(lines, ["line1", "line2", "line3"])
    assert.deepEqual(errors, ["done"])
    assert.equal(run.exitCode, 0)
  })

  await step("background process: named, listed, its live logs, then killed", async () => {
    const started = await sandbox.process.exec({ name: "sleeper", command: "echo started; sleep 300" })
    assert.equal(started.status, "running")
    assert.ok((await sandbox.process.list()).some((p) => p.name === "sleeper" && p.status === "running"))
    const seen: Array<string> = []
    const stream = sandbox.process.streamLogs("sleeper", { onStdout: (line) => void seen.push(line) })
    for (const deadline = Date.now() + 10_000; seen.length === 0 && Date.now() < deadline;) await Bun.sleep(50)
    stream.close()
    assert.deepEqual(seen, ["started"])
    await sandbox.process.kill("sleeper")
    const ended = await sandbox.process.wait("sleeper", { interval: 100 })
    assert.equal(ended.status, "killed")
  })

  await step("stdin: write to a running process, then close it", async () => {
    await sandbox.process.exec({ name: "reader", command: "read l; echo \"got $l\"; wc -c", stdin: true })
    await sandbox.process.writeStdin("reader", "typed line\n")
    await sandbox.process.writeStdin("reader", "12345")
    await sandbox.process.closeStdin("reader")
    const done = await sandbox.process.wait("reader", { interval: 100 })
    assert.equal(done.status, "completed")
    assert.equal(await sandbox.process.logs("reader", "stdout"), "got typed line\n5\n")
  })

  await step("files: write and read text", async () => {
    await sandbox.fs.write("/tmp/flow/hello.txt", "hello, file\n")
    assert.equal(await sandbox.fs.read("/tmp/flow/hello.txt"), "hello, file\n")
  })

  await step("files: binary round trip (every byte value)", async () => {
    const bytes = Uint8Array.from({ length: 512 }, (_, i) => i % 256)
    await sandbox.fs.writeBinary("/tmp/flow/bytes.bin", bytes)
    assert.deepEqual(new Uint8Array(await (await sandbox.fs.readBinary("/tmp/flow/bytes.bin")).arrayBuffer()), bytes)
  })

  await step("files: more than 1 MiB (a form upload), and past 5 MiB (the SDK's multipart upload)", async () => {
    const big = new Uint8Array(3 * 1024 * 1024 + 17)
    for (let i = 0; i < big.length; i += 65_536) crypto.getRandomValues(big.subarray(i, Math.min(i + 65_536, big.length)))
    await sandbox.fs.writeBinary("/tmp/flow/big.bin", big)
    assert.deepEqual(new Uint8Array(await (await sandbox.fs.readBinary("/tmp/flow/big.bin")).arrayBuffer()), big)
    const bigger = new Uint8Array(11 * 1024 * 1024 + 3)
    for (let i = 0; i < bigger.length; i += 65_536) crypto.getRandomValues(bigger.subarray(i, Math.min(i + 65_536, bigger.length)))
    await sandbox.fs.writeBinary("/tmp/flow/bigger.bin", bigger)
    assert.deepEqual(new Uint8Array(await (await sandbox.fs.readBinary("/tmp/flow/bigger.bin")).arrayBuffer()), bigger)
  })

  await step("files: list, remove", async () => {
    const listed = await sandbox.fs.ls("/tmp/flow")
    assert.deepEqual((listed.files ?? []).map((f) => f.name).sort(), ["big.bin", "bigger.bin", "bytes.bin", "hello.txt"])
    await sandbox.fs.rm("/tmp/flow/hello.txt")
    const missing = await sandbox.fs.read("/tmp/flow/hello.txt").then(() => null, (e: unknown) => e)
    assert.ok(missing instanceof Error, `reading a removed file fails: ${String(missing)}`)
  })

  await step("get", async () => {
    const again = await SandboxInstance.get(sandbox.metadata.name!)
    assert.equal(again.metadata.name, sandbox.metadata.name)
    assert.equal(again.status, "DEPLOYED")
    assert.deepEqual(again.metadata.labels, LABELS)
    assert.equal((await again.process.exec({ command: "echo again", waitForCompletion: true })).stdout, "again\n")
  })

  await step("list sandboxes", async () => {
    const page = await SandboxInstance.list({ limit: 100 })
    assert.ok(page.data.some((s) => s.metadata.name === sandbox.metadata.name), "the sandbox is listed")
  })

  skip("pause and resume", "Blaxel has no pause: it puts idle sandboxes on standby itself, which the emulator does not model")
  skip("sessions, snapshots, drives, schedules, codegen", "not served by the Blaxel emulator")

  await step("delete", async () => {
    await sandbox.delete()
    const gone = await SandboxInstance.get(sandbox.metadata.name!).then(() => null, (e: unknown) => e)
    assert.ok(gone !== null, "a deleted sandbox is not found")
  })
})
