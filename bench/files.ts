/**
 * A 10 MiB file through the API and through the raw route (issue 13: ratio ≤ 3×), next to reading and writing the
 * file directly, to the floors of any transfer on this machine (a bare Bun.serve, a bare TCP socket in another
 * process) and to the sandbox's own disk.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { idempotencyKey, poll, runProcess, waitRuntimeOperation } from "../test/support/sandbox.ts"
import { type BenchGateway, firstLine, stats, time } from "./measure.ts"
import { report } from "./report.ts"

/** The floor of a 10 MiB transfer over HTTP: a bare Bun.serve that sends a file (arg) and writes a PUT body beside it. */
const BARE_FILE_SERVER = `
const file = process.argv.at(-1)
const server = Bun.serve({ port: 0, hostname: "127.0.0.1", maxRequestBodySize: 64 * 1024 * 1024, fetch: async (request) => {
  if (request.method !== "PUT") return new Response(Bun.file(file))
  await Bun.write(file + ".bare", await request.arrayBuffer())
  return new Response("ok")
} })
console.log("http://127.0.0.1:" + server.port + "/")
`

/** The floor of moving 10 MiB at all: a bare TCP socket in its own process that counts the bytes and answers one. */
const BARE_SOCKET_SERVER = `
const net = require("node:net")
const size = Number(process.argv.at(-1))
const server = net.createServer((socket) => {
  let received = 0
  socket.on("data", (d) => {
    received += d.length
    if (received >= size) {
      received -= size
      socket.write("k")
    }
  })
})
server.listen(0, "127.0.0.1", () => console.log(String(server.address().port)))
`

export const benchFiles = async ({ server, http, auth }: BenchGateway, sandbox: { readonly id: string }) => {
  // 3. a 10 MiB file read through the API vs reading the file directly.
  const tenMiB = Buffer.alloc(10 * 1024 * 1024, 7)
  const localFile = path.join(server.dataDir, "bench-10mib.bin")
  fs.writeFileSync(localFile, tenMiB)
  const write = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/write`, {
    ...auth, body: { path: "/workspace/big.bin", data_base64: tenMiB.toString("base64") }, headers: { "idempotency-key": idempotencyKey("w") }
  })
  await waitRuntimeOperation(http, auth, sandbox.id, write.body.id)
  const directRead = await time(async () => void (await Bun.file(localFile).arrayBuffer()), 10, 1)
  const apiRead = await time(async () => {
    const read = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/read`, { ...auth, body: { path: "/workspace/big.bin", limit_bytes: 10 * 1024 * 1024 } })
    const done = await poll(async () => (await http.get(`/v1/sandboxes/${sandbox.id}/runtime-operations/${read.body.id}`, auth)).body, (r) => r.state === "succeeded", 30_000, 2)
    Buffer.from(done.result.data_base64, "base64")
  }, 10, 1)
  report("10 MiB file read (API)", apiRead, { name: "direct file read", s: directRead })
  // The same bytes through the raw route: streamed in the request, no base64, no operation to poll.
  const rawHeaders = { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project }
  const rawUrl = `${server.url}/v1/sandboxes/${sandbox.id}/files/content?path=${encodeURIComponent("/workspace/big.bin")}`
  const rawRead = await time(async () => {
    const res = await fetch(rawUrl, { headers: rawHeaders })
    if ((await res.arrayBuffer()).byteLength !== tenMiB.length) throw new Error("the raw read was short")
  }, 10, 1)
  report("10 MiB raw read (GET content)", rawRead, { name: "direct file read", s: directRead }, "ratio ≤ 3×")
  const directWrite = await time(async () => fs.writeFileSync(`${localFile}.w`, tenMiB), 10, 1)
  const rawWrite = await time(async () => {
    const res = await fetch(rawUrl, { method: "PUT", headers: { ...rawHeaders, "content-type": "application/octet-stream" }, body: tenMiB })
    if (res.status !== 200) throw new Error(`the raw write answered ${res.status}`)
  }, 10, 1)
  report("10 MiB raw write (PUT content)", rawWrite, { name: "direct file write", s: directWrite }, "ratio ≤ 3×")
  // The floor of any HTTP transfer of those bytes on this machine: a bare Bun.serve in its own process sending
  // the file (sendfile) and taking a body whole, read by the same client call. Against the direct baselines the
  // floor alone is several × (loopback TCP and the client's own copy), so the 3× targets are read against it too.
  const bareFiles = Bun.spawn(["bun", "-e", BARE_FILE_SERVER, localFile], { stdout: "pipe", stderr: "inherit" })
  const bareFilesUrl = await firstLine(bareFiles.stdout)
  const bareRead = await time(async () => {
    if ((await (await fetch(bareFilesUrl)).arrayBuffer()).byteLength !== tenMiB.length) throw new Error("the bare read was short")
  }, 10, 1)
  const bareWrite = await time(async () => void (await (await fetch(bareFilesUrl, { method: "PUT", body: tenMiB })).text()), 10, 1)
  bareFiles.kill()
  report("  (10 MiB read from a bare Bun.serve)", bareRead, { name: "direct file read", s: directRead })
  report("  (raw read against that floor)", rawRead, { name: "bare Bun.serve read", s: bareRead })
  report("  (10 MiB write to a bare Bun.serve)", bareWrite, { name: "direct file write", s: directWrite })
  // Below HTTP: the same bytes through a bare loopback TCP socket to another process (no HTTP, no file).
  const bareSocket = Bun.spawn(["bun", "-e", BARE_SOCKET_SERVER, String(tenMiB.length)], { stdout: "pipe", stderr: "inherit" })
  const socketPort = Number(await firstLine(bareSocket.stdout))
  let answered: (() => void) | undefined
  let drained: (() => void) | undefined
  const socket = await Bun.connect({ hostname: "127.0.0.1", port: socketPort, socket: { data: () => answered?.(), drain: () => drained?.() } })
  const socketWrite = await time(async () => {
    const ack = new Promise<void>((resolve) => (answered = resolve))
    for (let at = 0; at < tenMiB.length;) {
      at += socket.write(tenMiB.subarray(at))
      if (at < tenMiB.length) await new Promise<void>((resolve) => (drained = resolve))
    }
    await ack
  }, 10, 1)
  socket.end()
  bareSocket.kill()
  report("  (10 MiB through a bare TCP socket)", socketWrite, { name: "direct file write", s: directWrite })
  report("  (raw write against that floor)", rawWrite, { name: "bare Bun.serve write", s: bareWrite })
  // What the sandbox's own disk costs: a process inside writes the same 10 MiB to a new file (timed inside, so
  // without its start). A sandbox's disk is a loop-mounted image of its own (the per-sandbox disk limit), not the
  // host's page cache: the raw write can never be faster than this.
  const insideSamples: Array<number> = []
  for (let i = 0; i < 12; i++) {
    const run = await runProcess(http, auth, sandbox.id, ["sh", "-c", "s=$(date +%s%N); head -c 10485760 /dev/zero > /workspace/inside-$$.bin; e=$(date +%s%N); rm /workspace/inside-$$.bin; echo $(( (e - s) / 1000 ))"])
    if (i >= 2) insideSamples.push(Number(run.stdout.trim()) / 1000)
  }
  const insideWrite = stats(insideSamples)
  report("  (10 MiB written by a process in the sandbox)", insideWrite, { name: "direct file write", s: directWrite })
  report("  (raw write against the sandbox's own write)", rawWrite, { name: "write inside the sandbox", s: insideWrite }, "ratio ≤ 3×")
}
