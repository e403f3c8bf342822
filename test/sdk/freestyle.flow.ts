/**
 * Freestyle's official SDK (`freestyle`, pinned in package.json) through its everyday flow against the Freestyle
 * emulator, offline (test/support/offline.ts runs it; test/sdk/freestyle.test.ts checks its report). The SDK reads
 * its key from FREESTYLE_API_KEY (which `emulate` prints); the emulator's address is its `baseUrl` option (it reads
 * no variable for it).
 */
import assert from "node:assert/strict"
import { Freestyle, FreestyleApiError } from "freestyle"
import { emulatorOf, runFlow } from "./flow.ts"

const METADATA = { suite: "sdk-contract", run: String(process.pid) }
/** All outbound traffic to the public internet (an endpoint with no identity is the VM being created). */
const ONLINE = { rules: [{ action: "allow" as const, source: {}, destination: { public: true as const } }] }

await runFlow(async ({ step, skip }) => {
  const freestyle = new Freestyle({ baseUrl: emulatorOf("freestyle").urls["api"]! })
  const created = await step("create (slug, firewall, metadata)", () => freestyle.vms.create({ slug: `sdk-flow-${process.pid}`, firewall: ONLINE, metadata: METADATA }))
  const { vm } = created

  await step("run a command: exit code, stdout, stderr", async () => {
    const ok = await vm.exec("echo hello; echo warn >&2")
    assert.deepEqual(ok, { stdout: "hello\n", stderr: "warn\n", statusCode: 0 })
    const failed = await vm.exec("echo out; exit 3")
    assert.equal(failed.statusCode, 3)
    assert.equal(failed.stdout, "out\n")
  })

  await step("run a command with env, stdin and a timeout (a null status when it is killed)", async () => {
    const run = await vm.exec({ command: "echo $GREETING; cat", env: { GREETING: "hi there" }, stdin: Buffer.from("from stdin\n").toString("base64") })
    assert.equal(run.stdout, "hi there\nfrom stdin\n")
    const slow = await vm.exec({ command: "echo started; sleep 30", timeoutMs: 500 })
    assert.equal(slow.statusCode, null)
    assert.equal(slow.stdout, "started\n")
  })

  skip("stream output", "Freestyle's exec-await answers a command's output whole, once it ends: there is no stream to follow")
  skip("background command and kill", "Freestyle's API has no handle to a running command (exec-await only); the SDK's PTY websocket is not emulated")

  await step("files: write and read text", async () => {
    await vm.fs.mkdir("/workspace/flow")
    await vm.fs.writeTextFile("/workspace/flow/hello.txt", "hello, file\n")
    assert.equal(await vm.fs.readTextFile("/workspace/flow/hello.txt"), "hello, file\n")
  })

  await step("files: binary round trip (every byte value), and a ranged read", async () => {
    const bytes = Uint8Array.from({ length: 512 }, (_, i) => i % 256)
    await vm.fs.writeFile("/workspace/flow/bytes.bin", bytes)
    assert.deepEqual(await vm.fs.readFile("/workspace/flow/bytes.bin"), bytes)
    assert.deepEqual(await vm.fs.readFile("/workspace/flow/bytes.bin", { offset: 10, length: 5 }), bytes.subarray(10, 15))
  })

  await step("files: more than 1 MiB, and past 8 MiB (the SDK's resumable upload)", async () => {
    const big = new Uint8Array(3 * 1024 * 1024 + 17)
    for (let i = 0; i < big.length; i += 65_536) crypto.getRandomValues(big.subarray(i, Math.min(i + 65_536, big.length)))
    await vm.fs.writeFile("/workspace/flow/big.bin", big)
    assert.deepEqual(await vm.fs.readFile("/workspace/flow/big.bin"), big)
    const bigger = new Uint8Array(9 * 1024 * 1024 + 5)
    for (let i = 0; i < bigger.length; i += 65_536) crypto.getRandomValues(bigger.subarray(i, Math.min(i + 65_536, bigger.length)))
    const progress: Array<number> = []
    await vm.fs.writeFile("/workspace/flow/bigger.bin", bigger, { chunkSize: 4 * 1024 * 1024, onProgress: (p) => void progress.push(p.completedBytes) })
    assert.deepEqual(progress, [4 * 1024 * 1024, 8 * 1024 * 1024, bigger.length])
    assert.deepEqual(await vm.fs.readFile("/workspace/flow/bigger.bin"), bigger)
  })

  await step("files: list, stat, exists, remove", async () => {
    const names = (await vm.fs.readDir("/workspace/flow")).map((e) => `${e.name}:${e.kind}`).sort()
    assert.deepEqual(names, ["big.bin:file", "bigger.bin:file", "bytes.bin:file", "hello.txt:file"])
    const stat = await vm.fs.stat("/workspace/flow/bytes.bin")
    assert.equal(stat.size, 512)
    assert.equal(stat.isFile, true)
    assert.equal(await vm.fs.exists("/workspace/flow/hello.txt"), true)
    await vm.fs.remove("/workspace/flow/hello.txt")
    assert.equal(await vm.fs.exists("/workspace/flow/hello.txt"), false)
    const missing = await vm.fs.readTextFile("/workspace/flow/hello.txt").then(() => null, (e: unknown) => e)
    assert.ok(missing instanceof FreestyleApiError && missing.status === 404, `reading a removed file: ${String(missing)}`)
  })

  await step("get (by id and by slug)", async () => {
    const byId = await freestyle.vms.get(created.vmId)
    assert.equal(byId.state, "running")
    assert.deepEqual(byId.metadata, METADATA)
    assert.equal((await freestyle.vms.get(`sdk-flow-${process.pid}`)).id, created.vmId)
  })

  await step("list VMs (by metadata)", async () => {
    const listed = await freestyle.vms.list({ metadata: `run:${METADATA.run}` })
    assert.deepEqual(listed.vms.map((v) => v.id), [created.vmId])
    assert.equal(listed.totalCount, 1)
  })

  await step("pause, then start", async () => {
    assert.equal((await vm.pause()).state, "paused")
    assert.equal((await freestyle.vms.get(created.vmId)).state, "paused")
    assert.equal((await vm.start()).state, "running")
    assert.equal((await vm.exec("echo back")).stdout, "back\n")
    assert.equal(await vm.fs.exists("/workspace/flow/bytes.bin"), true)
  })

  await step("resize (upward) and update (metadata, ttl)", async () => {
    const grown = await vm.resize({ cpu: 3 })
    assert.equal(grown.resources.cpu, 3)
    const updated = await vm.update({ metadata: { extra: "yes" }, ttlSeconds: 3600 })
    assert.equal(updated.metadata["extra"], "yes")
    assert.equal(updated.ttlSeconds, 3600)
  })

  skip("snapshots, domains, TLS rules, private networks, identities, PTY", "not served by the Freestyle emulator (a create asking for TLS rules or networks is refused with a 400 naming them)")

  await step("delete", async () => {
    await vm.delete()
    const gone = await freestyle.vms.get(created.vmId).then(() => null, (e: unknown) => e)
    assert.ok(gone instanceof FreestyleApiError && gone.status === 404, `a deleted VM is not found: ${String(gone)}`)
  })
})
