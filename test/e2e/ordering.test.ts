/**
 * One order per sandbox (docs/guide/sandboxes.md): processes and file operations on one sandbox start in the
 * order they were accepted, so a read accepted after a write sees it — also a raw read after a queued write —
 * while a process, once started, does not hold back what comes after it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { openGateway, type RunningServer } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, waitProcess, waitRuntimeOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: Awaited<ReturnType<typeof openGateway>>["http"]
let auth: KeyAuth
let sandboxId: string

beforeAll(async () => {
  ;({ server, http, auth } = await openGateway("ordering@example.com"))
  sandboxId = (await createReadySandbox(http, auth)).id
})
afterAll(() => server.stop())

const accept = async (route: string, body: Record<string, unknown>, sandbox = sandboxId) => {
  const res = await http.post(`/v1/sandboxes/${sandbox}${route}`, { ...auth, body, headers: { "idempotency-key": idempotencyKey("ord") } })
  expect(res.status, res.text).toBe(202)
  return res.body.id as string
}
const write = (path: string, text: string, mode: "overwrite" | "append" = "overwrite", sandbox = sandboxId) =>
  accept("/filesystem/write", { path, data_base64: Buffer.from(text).toString("base64"), mode, create_parents: true }, sandbox)
const read = (path: string, sandbox = sandboxId) => accept("/filesystem/read", { path }, sandbox)
const readText = async (id: string, sandbox = sandboxId) => {
  const done = await waitRuntimeOperation(http, auth, sandbox, id)
  expect(done.state, JSON.stringify(done.error)).toBe("succeeded")
  return Buffer.from(done.result.data_base64, "base64").toString()
}

describe("one order per sandbox", () => {
  it("a read accepted right after a write sees it, every time", async () => {
    const reads: Array<[number, string]> = []
    for (let i = 0; i < 12; i++) {
      await write("/workspace/order/value.txt", `v${i}`)
      reads.push([i, await read("/workspace/order/value.txt")])
    }
    for (const [i, id] of reads) expect(await readText(id)).toBe(`v${i}`)
  })

  it("appends accepted one after another land in that order", async () => {
    // Blaxel's wire appends (Daytona's and E2B's do not).
    const blaxel = (await createReadySandbox(http, auth, minimalSandbox({ provider: "blaxel", network: { internet_access: true } }))).id
    const ids: Array<string> = []
    for (let i = 0; i < 20; i++) ids.push(await write("/workspace/order/log.txt", `a${i}\n`, "append", blaxel))
    const last = await read("/workspace/order/log.txt", blaxel)
    expect(await readText(last, blaxel)).toBe(Array.from({ length: 20 }, (_, i) => `a${i}\n`).join(""))
    for (const id of ids) expect((await waitRuntimeOperation(http, auth, blaxel, id)).state).toBe("succeeded")
  })

  it("several clients at once: each client's write and read pairs stay in order", async () => {
    const client = async (c: number) => {
      const pairs: Array<[string, string]> = []
      for (let i = 0; i < 5; i++) {
        await write(`/workspace/order/client-${c}.txt`, `c${c}-${i}`)
        pairs.push([`c${c}-${i}`, await read(`/workspace/order/client-${c}.txt`)])
      }
      for (const [expected, id] of pairs) expect(await readText(id)).toBe(expected)
    }
    await Promise.all([0, 1, 2, 3].map(client))
  })

  it("a raw read right after a queued write sees it", async () => {
    for (let i = 0; i < 5; i++) {
      await write("/workspace/order/raw.txt", `raw-${i}`)
      const res = await fetch(`${server.url}/v1/sandboxes/${sandboxId}/files/content?path=/workspace/order/raw.txt`, {
        headers: { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project }
      })
      expect(res.status).toBe(200)
      expect(await res.text()).toBe(`raw-${i}`)
    }
  })

  it("processes start in the order they were accepted, and a running one holds back nothing", async () => {
    // A long process first: the file operations and processes after it must not wait for its end.
    const long = await accept("/processes", { command: ["sleep", "60"], timeout_seconds: 120 })
    const ids: Array<string> = []
    for (let i = 0; i < 6; i++) ids.push(await accept("/processes", { command: ["true"] }))
    const w = await write("/workspace/order/after-long.txt", "done")
    expect(await readText(await read("/workspace/order/after-long.txt"))).toBe("done")
    expect((await waitRuntimeOperation(http, auth, sandboxId, w)).state).toBe("succeeded")
    const finished = []
    for (const id of ids) finished.push(await waitProcess(http, auth, sandboxId, id))
    const starts = finished.map((p) => Date.parse(p.started_at))
    expect(starts).toEqual([...starts].sort((a, b) => a - b))
    const longNow = (await http.get(`/v1/sandboxes/${sandboxId}/processes/${long}`, auth)).body
    expect(longNow.state).toBe("running")
    const cancelled = await http.post(`/v1/sandboxes/${sandboxId}/processes/${long}/actions/cancel`, { ...auth, headers: { "idempotency-key": idempotencyKey("c") } })
    expect([200, 202]).toContain(cancelled.status)
  })
})
