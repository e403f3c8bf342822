/**
 * Vercel's official SDK (`@vercel/sandbox`, pinned in package.json) through its everyday flow against the Vercel
 * emulator, offline (test/support/offline.ts runs it; test/sdk/vercel.test.ts checks its report). The SDK has no
 * base-URL option or variable: it always asks https://vercel.com/api, so it is given a `fetch` that sends those
 * requests to the emulator, and the credentials `emulate` prints (VERCEL_TOKEN, VERCEL_TEAM_ID, VERCEL_PROJECT_ID)
 * as options, the way Vercel's docs pass an access token.
 */
import assert from "node:assert/strict"
import { Writable } from "node:stream"
import { Sandbox } from "@vercel/sandbox"
import { emulatorOf, runFlow } from "./flow.ts"

const api = emulatorOf("vercel").urls["api"]!
/** Every request the SDK makes, sent to the emulator instead of Vercel. */
const toEmulator: typeof fetch = Object.assign(
  (input: string | URL | Request, init?: RequestInit) => fetch(String(input instanceof Request ? input.url : input).replace("https://vercel.com/api", api), init),
  { preconnect: fetch.preconnect }
)
const access = {
  token: process.env["VERCEL_TOKEN"]!,
  teamId: process.env["VERCEL_TEAM_ID"]!,
  projectId: process.env["VERCEL_PROJECT_ID"]!,
  fetch: toEmulator
}
const TAGS = { suite: "sdk-contract" }

const collect = () => {
  const chunks: Array<string> = []
  return { chunks, stream: new Writable({ write: (chunk, _, done) => (chunks.push(String(chunk)), done()) }) }
}

await runFlow(async ({ step, skip }) => {
  const sandbox = await step("create (POST /v3/sandboxes, no name given)", () => Sandbox.create({ ...access, tags: TAGS, timeout: 600_000 }))

  await step("run a command: exit code, stdout, stderr", async () => {
    const ok = await sandbox.runCommand("sh", ["-c", "echo hello; echo warn >&2"])
    assert.equal(ok.exitCode, 0)
    assert.equal(await ok.stdout(), "hello\n")
    assert.equal(await ok.stderr(), "warn\n")
    const failed = await sandbox.runCommand("sh", ["-c", "echo out; echo err >&2; exit 3"])
    assert.equal(failed.exitCode, 3)
    assert.equal(await failed.stdout(), "out\n")
    assert.equal(await failed.stderr(), "err\n")
  })

  await step("run a command with cwd and env", async () => {
    await sandbox.mkDir("flow-cwd")
    const run = await sandbox.runCommand({ cmd: "sh", args: ["-c", "pwd; echo $GREETING"], cwd: "flow-cwd", env: { GREETING: "hi there" } })
    const [cwd, greeting] = (await run.stdout()).trim().split("\n")
    assert.match(cwd ?? "", /\/flow-cwd$/)
    assert.equal(greeting, "hi there")
  })

  await step("stream output (stdout, stderr writables) as it is written", async () => {
    const out = collect()
    const err = collect()
    const run = await sandbox.runCommand({ cmd: "sh", args: ["-c", "for i in 1 2 3; do echo line$i; sleep 0.3; done; echo done >&2"], stdout: out.stream, stderr: err.stream })
    assert.equal(out.chunks.join(""), "line1\nline2\nline3\n")
    assert.ok(out.chunks.length >= 2, `the output came in pieces as it was written (${out.chunks.length})`)
    assert.equal(err.chunks.join(""), "done\n")
    assert.equal(run.exitCode, 0)
  })

  await step("background command: detached, its logs, then killed", async () => {
    const command = await sandbox.runCommand({ cmd: "sh", args: ["-c", "echo started; sleep 300"], detached: true })
    assert.equal(command.exitCode, null)
    for await (const log of command.logs()) {
      assert.deepEqual({ stream: log.stream, data: log.data }, { stream: "stdout", data: "started\n" })
      break
    }
    await command.kill("SIGKILL")
    const finished = await command.wait()
    assert.equal(finished.exitCode, 137, "a killed command exits as a shell reports SIGKILL")
    assert.equal((await sandbox.getCommand(command.cmdId)).exitCode, 137)
  })

  skip("stdin and interactive terminals (openInteractive)", "the Vercel emulator serves no interactive session: Vercel's is a PTY behind its own proxy")

  await step("files: write and read text", async () => {
    await sandbox.writeFiles([{ path: "flow/hello.txt", content: Buffer.from("hello, file\n") }])
    assert.equal((await sandbox.readFileToBuffer({ path: "flow/hello.txt" }))?.toString(), "hello, file\n")
    assert.equal(await sandbox.fs.readFile("flow/hello.txt", "utf8"), "hello, file\n")
  })

  await step("files: binary round trip (every byte value)", async () => {
    const bytes = Buffer.from(Uint8Array.from({ length: 512 }, (_, i) => i % 256))
    await sandbox.writeFiles([{ path: "flow/bytes.bin", content: bytes }])
    assert.deepEqual(await sandbox.readFileToBuffer({ path: "flow/bytes.bin" }), bytes)
  })

  await step("files: more than 1 MiB", async () => {
    const big = Buffer.alloc(3 * 1024 * 1024 + 17)
    for (let i = 0; i < big.length; i += 65_536) crypto.getRandomValues(big.subarray(i, Math.min(i + 65_536, big.length)))
    await sandbox.fs.writeFile("flow/big.bin", big)
    assert.deepEqual(await sandbox.readFileToBuffer({ path: "flow/big.bin" }), big)
  })

  await step("files: list, stat, exists, remove (the SDK's fs, through commands)", async () => {
    assert.deepEqual((await sandbox.fs.readdir("flow")).sort(), ["big.bin", "bytes.bin", "hello.txt"])
    assert.equal((await sandbox.fs.stat("flow/bytes.bin")).size, 512)
    assert.equal(await sandbox.fs.exists("flow/hello.txt"), true)
    await sandbox.fs.unlink("flow/hello.txt")
    assert.equal(await sandbox.fs.exists("flow/hello.txt"), false)
    assert.equal(await sandbox.readFileToBuffer({ path: "flow/hello.txt" }), null, "a removed file reads as none (404)")
  })

  await step("get by name", async () => {
    const again = await Sandbox.get({ ...access, name: sandbox.name })
    assert.equal(again.name, sandbox.name)
    assert.equal(again.status, "running")
    assert.deepEqual(again.tags, TAGS)
    assert.equal((await again.runCommand("echo", ["again"])).exitCode, 0)
  })

  await step("list sandboxes (by tag)", async () => {
    const listed = await (await Sandbox.list({ ...access, tags: TAGS })).toArray()
    assert.deepEqual(listed.map((s) => s.name), [sandbox.name])
  })

  skip("pause and resume (persistent sandboxes, snapshots)", "the Vercel emulator refuses persistent sandboxes (400): Vercel's resume restores a snapshot, which it does not take")
  skip("ports (domain(port))", "the Vercel emulator serves no routes: a create with ports is refused (400)")

  await step("stop, then delete", async () => {
    await sandbox.stop()
    assert.equal((await Sandbox.get({ ...access, name: sandbox.name })).status, "stopped")
    await sandbox.delete()
    const gone = await Sandbox.get({ ...access, name: sandbox.name }).then(() => null, (e: unknown) => e)
    assert.ok(gone instanceof Error && (gone as { response?: { status?: number } }).response?.status === 404, `a deleted sandbox is not found: ${String(gone)}`)
  })
})
