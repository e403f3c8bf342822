/**
 * 1 GiB up and down through the raw route (issue 13), with the gateway's RSS before and at its peak (target ± 20 MiB)
 * and the throughput each way: on E2B's emulator in the gateway's process, then on an E2B cloud in a process of its
 * own (remote mode). The figures go to the notes printed after the table.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { startRemoteE2B } from "../test/support/remote-e2b.ts"
import { createReadySandbox, minimalSandbox } from "../test/support/sandbox.ts"
import { api, bootstrap, startServer, tempDataDir } from "../test/support/server.ts"
import type { BenchGateway } from "./measure.ts"
import { notes } from "./report.ts"

export const benchGiB = async ({ server, http, auth }: BenchGateway) => {
  const rawHeaders = { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project }
  // 3b. 1 GiB up and down through the raw route on E2B's emulator (its wire streams writes): the gateway's RSS
  // (emulators and all: one process) before and at its peak, and the throughput each way.
  const e2b = await createReadySandbox(http, auth, minimalSandbox({ provider: "e2b" }))
  const bigUrl = `${server.url}/v1/sandboxes/${e2b.id}/files/content?path=${encodeURIComponent("/workspace/gib.bin")}`
  const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024
  const measure = async (what: string, transfer: () => Promise<void>, pid = server.pid) => {
    const before = rssMiB(pid)
    let peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 20)
    const t = performance.now()
    try {
      await transfer()
    } finally {
      clearInterval(sampler)
    }
    const seconds = (performance.now() - t) / 1000
    notes.push(`${what}: ${(1024 / seconds).toFixed(0)} MiB/s; gateway RSS ${before.toFixed(0)} MiB before, +${(peak - before).toFixed(0)} MiB at its peak (target ± 20 MiB)`)
  }
  const piece = new Uint8Array(1024 * 1024).fill(9)
  // A client uploading a file states its length (curl -T, the CLI's cp): such a body is passed on untouched.
  const gibFile = path.join(server.dataDir, "bench-1gib.bin")
  {
    const fd = fs.openSync(gibFile, "w")
    for (let i = 0; i < 1024; i++) fs.writeSync(fd, piece)
    fs.closeSync(fd)
  }
  await measure("1 GiB raw write of stated length (PUT from a file, E2B emulator)", async () => {
    const res = await fetch(bigUrl, { method: "PUT", headers: { ...rawHeaders, "content-type": "application/octet-stream" }, body: Bun.file(gibFile) })
    if (res.status !== 201) throw new Error(`the 1 GiB write answered ${res.status}: ${await res.text()}`)
  })
  // An unsized (chunked) body is counted as it passes, to be cut at the limit.
  await measure("1 GiB raw write, chunked (PUT, E2B emulator)", async () => {
    let sent = 0
    const body = new ReadableStream<Uint8Array>({ pull: (c) => (sent++ === 1024 ? c.close() : c.enqueue(piece)) })
    const res = await fetch(bigUrl, { method: "PUT", headers: { ...rawHeaders, "content-type": "application/octet-stream" }, body, duplex: "half" } as RequestInit)
    if (res.status !== 200) throw new Error(`the 1 GiB write answered ${res.status}: ${await res.text()}`)
  })
  const readGiB = (url: string, headers: Record<string, string>) => async () => {
    const res = await fetch(url, { headers })
    let size = 0
    for await (const chunk of res.body!) size += chunk.length
    if (size !== 1024 * 1024 * 1024) throw new Error(`the 1 GiB read was ${size} bytes`)
  }
  await measure("1 GiB raw read (GET, E2B emulator)", readGiB(bigUrl, rawHeaders))

  // 3c. The same through a gateway whose E2B is a cloud of its own (remote mode: the emulator in another process),
  // its envd framing downloads by Content-Length as E2B's does: the gateway's own memory, without the emulator's
  // and the sandbox channel's (which the chunked answers of Bun's server make count every chunk).
  const cloud = await startRemoteE2B(tempDataDir("bench-e2b-cloud"), { framed: true })
  const remote = await startServer({ env: cloud.env })
  try {
    const remoteBoot = await bootstrap(remote.dataDir, "bench-remote@example.com")
    const remoteAuth = { token: remoteBoot.api_key, project: remoteBoot.project_id }
    const remoteHeaders = { authorization: `Bearer ${remoteAuth.token}`, "x-metal-project-id": remoteAuth.project }
    const far = await createReadySandbox(api(remote.url), remoteAuth, minimalSandbox({ provider: "e2b" }))
    const farUrl = `${remote.url}/v1/sandboxes/${far.id}/files/content?path=${encodeURIComponent("/workspace/gib.bin")}`
    await measure("1 GiB raw write of stated length (remote E2B in its own process)", async () => {
      // (E2B's home is /home/user: /workspace is made on the first write.)
      const res = await fetch(`${farUrl}&create_parents=true`, { method: "PUT", headers: { ...remoteHeaders, "content-type": "application/octet-stream" }, body: Bun.file(gibFile) })
      if (res.status !== 201) throw new Error(`the 1 GiB write answered ${res.status}: ${await res.text()}`)
    }, remote.pid)
    await measure("1 GiB raw read (remote E2B, downloads framed by Content-Length)", readGiB(farUrl, remoteHeaders), remote.pid)
  } finally {
    await remote.stop()
    await cloud.stop()
    fs.rmSync(gibFile)
  }
}
