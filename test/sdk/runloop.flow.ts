/**
 * Runloop's official SDK (`@runloop/api-client`, pinned in package.json) through its everyday flow against the
 * Runloop emulator, offline (test/support/offline.ts runs it; test/sdk/runloop.test.ts checks its report). The SDK is
 * pointed at the emulator only by the environment `emulate` prints for it (RUNLOOP_BASE_URL, RUNLOOP_API_KEY).
 * Paths are relative: Runloop resolves them against the devbox user's home, where commands also start.
 */
import assert from "node:assert/strict"
import { RunloopSDK } from "@runloop/api-client"
import { runFlow } from "./flow.ts"

const METADATA = { suite: "sdk-contract", run: String(process.pid) }

await runFlow(async ({ step, skip }) => {
  const sdk = new RunloopSDK()
  const devbox = await step("create (create_and_await_running)", () => sdk.devbox.create({ name: "sdk-flow", metadata: METADATA }))

  await step("run a command: exit code, stdout, stderr", async () => {
    const ok = await devbox.cmd.exec("echo hello; echo warn >&2")
    assert.equal(ok.exitCode, 0)
    assert.equal(ok.success, true)
    assert.equal(await ok.stdout(), "hello\n")
    assert.equal(await ok.stderr(), "warn\n")
    const failed = await devbox.cmd.exec("echo out; echo err >&2; exit 3")
    assert.equal(failed.exitCode, 3)
    assert.equal(failed.failed, true)
    assert.equal(await failed.stdout(), "out\n")
    assert.equal(await failed.stderr(), "err\n")
  })

  await step("a long output: the last lines come with the answer, the whole from the stream", async () => {
    const run = await devbox.cmd.exec("seq 1 250")
    assert.equal(run.result.stdout_truncated, true)
    assert.equal((run.result.stdout ?? "").split("\n").filter((l) => l !== "").length, 100)
    assert.equal(await run.stdout(), Array.from({ length: 250 }, (_, i) => `${i + 1}\n`).join(""))
    assert.equal(await run.stdout(3), "248\n249\n250")
  })

  await step("a command that outlasts execute's optimistic wait is awaited (wait_for_status)", async () => {
    const run = await sdk.api.devboxes.execute(devbox.id, { command: "sleep 1; echo late", optimistic_timeout: 0 })
    assert.equal(run.status, "running")
    const done = await sdk.api.devboxes.executions.awaitCompleted(devbox.id, run.execution_id)
    assert.equal(done.status, "completed")
    assert.equal(done.stdout, "late\n")
  })

  await step("stream output (stdout, stderr callbacks) as it is written", async () => {
    const lines: Array<string> = []
    const errors: Array<string> = []
    const run = await devbox.cmd.exec("for i in 1 2 3; do echo line$i; sleep 0.3; done; echo done >&2", {
      stdout: (line) => void lines.push(line),
      stderr: (line) => void errors.push(line)
    })
    assert.equal(lines.join(""), "line1\nline2\nline3\n")
    assert.ok(lines.length >= 2, `the output came in pieces as it was written (${lines.length})`)
    assert.equal(errors.join(""), "done\n")
    assert.equal(run.exitCode, 0)
  })

  await step("background command: running, then killed", async () => {
    const execution = await devbox.cmd.execAsync("sleep 300")
    assert.equal((await execution.getState()).status, "running")
    await execution.kill()
    const result = await execution.result()
    assert.equal(result.result.status, "completed")
    assert.equal(result.exitCode, 137, "a killed command reads as the shell reports SIGKILL")
  })

  skip("stdin (attach_stdin, send_std_in)", "the Runloop emulator refuses stdin (400): Runloop's own SDK disables sending input (its Execution.sendStdIn kills the execution)")

  await step("files: write and read text", async () => {
    await devbox.cmd.exec("mkdir -p flow")
    await devbox.file.write({ file_path: "flow/hello.txt", contents: "hello, file\n" })
    assert.equal(await devbox.file.read({ file_path: "flow/hello.txt" }), "hello, file\n")
    assert.equal((await devbox.cmd.exec("cat flow/hello.txt")).result.stdout, "hello, file\n")
  })

  await step("files: binary round trip (every byte value), upload and download", async () => {
    const bytes = Uint8Array.from({ length: 512 }, (_, i) => i % 256)
    await devbox.file.upload({ path: "flow/bytes.bin", file: new File([bytes], "bytes.bin") })
    const back = new Uint8Array(await (await devbox.file.download({ path: "flow/bytes.bin" })).arrayBuffer())
    assert.deepEqual(back, bytes)
  })

  await step("files: more than 1 MiB", async () => {
    const big = new Uint8Array(3 * 1024 * 1024 + 17)
    for (let i = 0; i < big.length; i += 65_536) crypto.getRandomValues(big.subarray(i, Math.min(i + 65_536, big.length)))
    await devbox.file.upload({ path: "flow/big.bin", file: new File([big], "big.bin") })
    assert.deepEqual(new Uint8Array(await (await devbox.file.download({ path: "flow/big.bin" })).arrayBuffer()), big)
  })

  await step("files: list and delete (through commands: Runloop's API has no listing or delete)", async () => {
    assert.equal((await devbox.cmd.exec("ls flow")).result.stdout, "big.bin\nbytes.bin\nhello.txt\n")
    assert.equal((await devbox.cmd.exec("rm flow/hello.txt")).exitCode, 0)
    const missing = await devbox.file.read({ file_path: "flow/hello.txt" }).then(() => null, (e: unknown) => e)
    assert.ok(missing instanceof Error && (missing as { status?: number }).status === 404, `reading a removed file: ${String(missing)}`)
  })

  await step("get info", async () => {
    const info = await devbox.getInfo()
    assert.equal(info.id, devbox.id)
    assert.equal(info.status, "running")
    assert.equal(info.name, "sdk-flow")
    assert.deepEqual(info.metadata, METADATA)
  })

  await step("list devboxes", async () => {
    const listed = await sdk.devbox.list({ status: "running" })
    assert.ok(listed.some((d) => d.id === devbox.id), "the running devbox is listed")
  })

  await step("suspend, then resume", async () => {
    await devbox.suspend()
    assert.equal((await devbox.awaitSuspended()).status, "suspended")
    assert.equal((await devbox.resume()).status, "running")
    assert.equal((await devbox.cmd.exec("echo back")).result.stdout, "back\n")
    assert.equal(await devbox.file.read({ file_path: "flow/bytes.bin" }).then((t) => t.length > 0), true)
  })

  skip("tunnels (net.enableTunnel) and SSH keys", "the Runloop emulator serves no devbox ports: tunnels are Runloop's proxy")
  skip("logs", "the Runloop emulator does not serve a devbox's logs")

  await step("shutdown", async () => {
    await devbox.shutdown()
    assert.equal((await devbox.getInfo()).status, "shutdown")
  })
})
