/**
 * Daytona's official SDK (`@daytonaio/sdk`, pinned in package.json) through its everyday flow against the Daytona
 * emulator, offline (test/support/offline.ts runs it; test/sdk/daytona.test.ts checks its report). The SDK is pointed
 * at the emulator only by the environment `emulate` prints for it (DAYTONA_API_URL, DAYTONA_API_KEY). Paths are
 * relative: the daemon resolves them against the sandbox's working directory.
 */
import assert from "node:assert/strict"
import { Daytona, DaytonaFileNotFoundError, DaytonaNotFoundError, DaytonaTimeoutError, type Sandbox } from "@daytonaio/sdk"
import { runFlow } from "./flow.ts"

const LABELS = { suite: "sdk-contract", run: String(process.pid) }

/** Polls `check` until it holds (the SDK's own calls, never a fixed sleep). */
const until = async (what: string, check: () => Promise<boolean>) => {
  const deadline = Date.now() + 30_000
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within 30 s`)
    await Bun.sleep(50)
  }
}

await runFlow(async ({ step, skip }) => {
  const daytona = new Daytona()
  const sandbox: Sandbox = await step("create", () => daytona.create({ labels: { ...LABELS }, envVars: { FLOW: "daytona" } }))

  await step("process.executeCommand: exit code and output", async () => {
    const ok = await sandbox.process.executeCommand("echo hello; echo warn >&2; echo $FLOW")
    assert.equal(ok.exitCode, 0)
    assert.equal(ok.result, "hello\nwarn\ndaytona\n")
    const failed = await sandbox.process.executeCommand("echo out; exit 3")
    assert.equal(failed.exitCode, 3)
    assert.equal(failed.result, "out\n")
  })

  await step("process.executeCommand with cwd, env and a timeout", async () => {
    await sandbox.fs.createFolder("flow-cwd", "755")
    const run = await sandbox.process.executeCommand("pwd; echo $GREETING", "flow-cwd", { GREETING: "hi there" })
    const [cwd, greeting] = run.result.trim().split("\n")
    assert.match(cwd ?? "", /\/flow-cwd$/)
    assert.equal(greeting, "hi there")
    const slow = await sandbox.process.executeCommand("sleep 30", undefined, undefined, 1).then(() => null, (e: unknown) => e)
    assert.ok(slow instanceof DaytonaTimeoutError, `a command past its timeout is a DaytonaTimeoutError, got ${String(slow)}`)
  })

  await step("a session is one shell: export and cd carry over, a command answers its exit code and output", async () => {
    await sandbox.process.createSession("flow-shell")
    const first = await sandbox.process.executeSessionCommand("flow-shell", { command: "export FLOW_VAR=kept; mkdir -p flow-dir; cd flow-dir" })
    assert.equal(first.exitCode, 0)
    const second = await sandbox.process.executeSessionCommand("flow-shell", { command: "echo $FLOW_VAR; pwd; echo oops >&2; false" })
    assert.equal(second.exitCode, 1)
    const [value, cwd] = second.stdout!.trim().split("\n")
    assert.equal(value, "kept")
    assert.match(cwd ?? "", /\/flow-dir$/)
    assert.equal(second.stderr, "oops\n")
    const session = await sandbox.process.getSession("flow-shell")
    assert.deepEqual(session.commands.map((c) => c.exitCode), [0, 1])
  })

  await step("an asynchronous session command streamed through its logs callback", async () => {
    await sandbox.process.createSession("flow-stream")
    const { cmdId } = await sandbox.process.executeSessionCommand("flow-stream", { command: "for i in 1 2 3; do echo line$i; sleep 0.3; done; echo done >&2", runAsync: true })
    const chunks: Array<string> = []
    const errors: Array<string> = []
    await sandbox.process.getSessionCommandLogs("flow-stream", cmdId, (out) => void chunks.push(out), (err) => void errors.push(err))
    assert.equal(chunks.join(""), "line1\nline2\nline3\n")
    assert.ok(chunks.length >= 2, `the output came in pieces as it was written (${chunks.length})`)
    assert.equal(errors.join(""), "done\n")
    assert.equal((await sandbox.process.getSessionCommand("flow-stream", cmdId)).exitCode, 0)
    const logs = await sandbox.process.getSessionCommandLogs("flow-stream", cmdId)
    assert.equal(logs.stdout, "line1\nline2\nline3\n")
    assert.equal(logs.stderr, "done\n")
  })

  await step("a background command, then deleting its session kills it", async () => {
    await sandbox.process.createSession("flow-background")
    const { cmdId } = await sandbox.process.executeSessionCommand("flow-background", { command: "sleep 300", runAsync: true })
    assert.equal((await sandbox.process.getSessionCommand("flow-background", cmdId)).exitCode, undefined)
    assert.ok((await sandbox.process.listSessions()).some((s) => s.sessionId === "flow-background"))
    await sandbox.process.deleteSession("flow-background")
    assert.ok(!(await sandbox.process.listSessions()).some((s) => s.sessionId === "flow-background"))
    const gone = await sandbox.process.getSession("flow-background").then(() => null, (e: unknown) => e)
    assert.ok(gone instanceof DaytonaNotFoundError, `a deleted session is not found, got ${String(gone)}`)
  })

  await step("stdin: input sent to a running session command (echoed, and not)", async () => {
    await sandbox.process.createSession("flow-input")
    const echoed = await sandbox.process.executeSessionCommand("flow-input", { command: "read line; echo got:$line", runAsync: true })
    await sandbox.process.sendSessionCommandInput("flow-input", echoed.cmdId, "typed")
    await until("the command reading input ends", async () => (await sandbox.process.getSessionCommand("flow-input", echoed.cmdId)).exitCode !== undefined)
    assert.equal((await sandbox.process.getSessionCommandLogs("flow-input", echoed.cmdId)).stdout, "typed\ngot:typed\n")
    const quiet = await sandbox.process.executeSessionCommand("flow-input", { command: "read a; read b; echo \"$b $a\"", runAsync: true, suppressInputEcho: true })
    await sandbox.process.sendSessionCommandInput("flow-input", quiet.cmdId, "first\n")
    await sandbox.process.sendSessionCommandInput("flow-input", quiet.cmdId, "second")
    await until("the second command ends", async () => (await sandbox.process.getSessionCommand("flow-input", quiet.cmdId)).exitCode !== undefined)
    assert.equal((await sandbox.process.getSessionCommandLogs("flow-input", quiet.cmdId)).stdout, "second first\n")
    const late = await sandbox.process.sendSessionCommandInput("flow-input", quiet.cmdId, "too late").then(() => null, (e: unknown) => e)
    assert.ok(late instanceof Error && (late as { statusCode?: number }).statusCode === 410, `input to an ended command is 410, got ${String(late)}`)
  })

  await step("files: upload and download text", async () => {
    await sandbox.fs.uploadFile(Buffer.from("hello, file\n"), "flow/hello.txt")
    assert.equal((await sandbox.fs.downloadFile("flow/hello.txt")).toString(), "hello, file\n")
  })

  await step("files: binary round trip (every byte value)", async () => {
    const bytes = Buffer.from(Uint8Array.from({ length: 512 }, (_, i) => i % 256))
    await sandbox.fs.uploadFile(bytes, "flow/bytes.bin")
    assert.deepEqual(await sandbox.fs.downloadFile("flow/bytes.bin"), bytes)
  })

  await step("files: more than 1 MiB, in bulk and as streams", async () => {
    const big = Buffer.alloc(3 * 1024 * 1024 + 17)
    for (let i = 0; i < big.length; i += 65_536) crypto.getRandomValues(big.subarray(i, Math.min(i + 65_536, big.length)))
    await sandbox.fs.uploadFiles([{ source: big, destination: "flow/big.bin" }, { source: Buffer.from("small\n"), destination: "flow/nested/small.txt" }])
    const downloaded = await sandbox.fs.downloadFiles([{ source: "flow/big.bin" }, { source: "flow/nested/small.txt" }, { source: "flow/missing.txt" }])
    assert.deepEqual(downloaded[0]!.result, big)
    assert.equal(String(downloaded[1]!.result), "small\n")
    assert.match(downloaded[2]!.error ?? "", /not found/)
    await sandbox.fs.uploadFileStream(new Blob([big]).stream(), "flow/big-stream.bin")
    let length = 0
    for await (const chunk of await sandbox.fs.downloadFileStream("flow/big-stream.bin")) length += (chunk as Buffer).length
    assert.equal(length, big.length)
  })

  await step("files: list, details, delete", async () => {
    const names = (await sandbox.fs.listFiles("flow")).map((e) => e.name).sort()
    assert.deepEqual(names, ["big-stream.bin", "big.bin", "bytes.bin", "hello.txt", "nested"])
    const deep = await sandbox.fs.listFiles("flow", { depth: 2 })
    assert.ok(deep.some((e) => e.path?.endsWith("/flow/nested/small.txt")), "depth 2 reaches into nested/")
    const details = await sandbox.fs.getFileDetails("flow/bytes.bin")
    assert.equal(details.size, 512)
    assert.equal(details.isDir, false)
    await sandbox.fs.deleteFile("flow/hello.txt")
    const missing = await sandbox.fs.downloadFile("flow/hello.txt").then(() => null, (e: unknown) => e)
    assert.ok(missing instanceof DaytonaFileNotFoundError, `a deleted file is not found, got ${String(missing)}`)
    const details2 = await sandbox.fs.getFileDetails("flow/hello.txt").then(() => null, (e: unknown) => e)
    assert.ok(details2 instanceof DaytonaNotFoundError, `details of a deleted file: not found, got ${String(details2)}`)
    await sandbox.fs.deleteFile("flow/nested", true)
  })

  await step("a PTY session: typed input, resize, its exit code", async () => {
    const output: Array<string> = []
    const pty = await sandbox.process.createPty({ id: "flow-pty", cols: 100, rows: 30, envs: { PTY_FLOW: "yes" }, onData: (data) => void output.push(new TextDecoder().decode(data)) })
    await pty.sendInput("echo pty-$((6*7)) $PTY_FLOW; stty size\n")
    await until("the terminal answers", async () => output.join("").includes("pty-42 yes"))
    await until("the terminal says its size", async () => output.join("").includes("30 100"))
    await pty.resize(120, 40)
    assert.equal((await sandbox.process.getPtySessionInfo("flow-pty")).cols, 120)
    await pty.sendInput("exit 5\n")
    const result = await pty.wait()
    assert.equal(result.exitCode, 5)
  })

  await step("getSignedPreviewUrl: a port of the sandbox served through it until expired", async () => {
    await sandbox.fs.uploadFile(Buffer.from("served offline\n"), "site/index.html")
    await sandbox.process.createSession("flow-server")
    await sandbox.process.executeSessionCommand("flow-server", { command: "cd site && exec python3 -m http.server 8000", runAsync: true })
    const preview = await sandbox.getSignedPreviewUrl(8000, 120)
    let body = ""
    await until("the server answers through the preview", async () => {
      const answer = await fetch(`${preview.url}/index.html`).catch(() => null)
      body = answer?.ok === true ? await answer.text() : ""
      return body !== ""
    })
    assert.equal(body, "served offline\n")
    await sandbox.expireSignedPreviewUrl(8000, preview.token)
    assert.equal((await fetch(`${preview.url}/index.html`)).status, 404)
    await sandbox.process.deleteSession("flow-server")
  })

  await step("get", async () => {
    const got = await daytona.get(sandbox.id)
    assert.equal(got.id, sandbox.id)
    assert.equal(got.state, "started")
    assert.deepEqual({ suite: got.labels["suite"], run: got.labels["run"] }, LABELS)
  })

  await step("list (by labels)", async () => {
    const listed: Array<string> = []
    for await (const s of daytona.list({ labels: LABELS })) listed.push(s.id)
    assert.deepEqual(listed, [sandbox.id])
  })

  await step("stop, then start: files stay", async () => {
    await sandbox.stop()
    assert.equal(sandbox.state, "stopped")
    assert.equal((await daytona.get(sandbox.id)).state, "stopped")
    await sandbox.start()
    assert.equal(sandbox.state, "started")
    assert.equal((await sandbox.process.executeCommand("cat flow/bytes.bin | wc -c")).result.trim(), "512")
  })

  skip("process.codeRun", "the emulator does not serve /process/code-run (it answers 404): it runs no language toolbox")
  skip("getMetrics", "the emulator serves no telemetry: Daytona's metrics come from its analytics API")
  skip("getPreviewLink", "the emulator serves signed preview URLs only (getSignedPreviewUrl); /ports/{port}/preview-url's standard previews are Daytona's proxy with its own auth")
  skip("pause", "Daytona pauses only sandboxes of its linux-vm class; stop and start are the lifecycle the emulator serves")

  await step("delete", async () => {
    await sandbox.delete()
    const listed: Array<string> = []
    for await (const s of daytona.list({ labels: LABELS })) listed.push(s.id)
    assert.deepEqual(listed, [])
    const gone = await daytona.get(sandbox.id).then(() => null, (e: unknown) => e)
    assert.ok(gone instanceof DaytonaNotFoundError, `a deleted sandbox is not found, got ${String(gone)}`)
  })
})
