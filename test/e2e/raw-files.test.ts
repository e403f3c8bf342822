/**
 * Raw files (issue 13, item 6, within the providers' write size) through the real gateway: GET streams the bytes
 * with Content-Length, ETag, ranges (206 / 416) and 304; PUT writes a body with create / overwrite / append and
 * create_parents; every wrong use is refused in the envelope; a symlink the sandbox plants resolves inside it.
 */
import * as os from "node:os"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"
import { createReadySandbox, type KeyAuth, minimalSandbox, runProcess } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth
let sandbox: any

const url = (path: string, query = "") => `${server.url}/v1/sandboxes/${sandbox.id}/files/content?path=${encodeURIComponent(path)}${query}`
const headers = (extra: Record<string, string> = {}, a: KeyAuth = auth) => ({ authorization: `Bearer ${a.token}`, "x-metal-project-id": a.project, ...extra })
const get = (path: string, extra: Record<string, string> = {}, a?: KeyAuth) => fetch(url(path), { headers: headers(extra, a) })
const put = (path: string, body: Uint8Array | string, query = "") =>
  fetch(url(path, query), { method: "PUT", headers: headers({ "content-type": "application/octet-stream" }), body: typeof body === "string" ? body : Buffer.from(body) })
const envelopeOf = async (res: Response) => ({ status: res.status, body: await res.json(), headers: res.headers })

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  const owner = await bootstrap(server.dataDir, "raw@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
  sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider: "daytona" }))
})
afterAll(() => server.stop())

describe("raw files", () => {
  it("PUT creates, replaces and refuses to create twice; GET returns the exact bytes with length and ETag", async () => {
    const bytes = new Uint8Array(256).map((_, i) => i)
    const created = await put("/workspace/raw/bin.dat", bytes, "&create_parents=true&mode=create")
    expect(created.status).toBe(201)
    expect(await created.json()).toEqual({ path: "/workspace/raw/bin.dat", size_bytes: 256 })
    expectEnvelope(await envelopeOf(await put("/workspace/raw/bin.dat", bytes, "&mode=create")), 409, "file_exists")
    const replaced = await put("/workspace/raw/bin.dat", bytes.slice(0, 100))
    expect(replaced.status).toBe(200)
    const read = await get("/workspace/raw/bin.dat")
    expect(read.status).toBe(200)
    expect(read.headers.get("content-type")).toBe("application/octet-stream")
    expect(read.headers.get("content-length")).toBe("100")
    expect(read.headers.get("etag")).toMatch(/^W\/"[0-9a-f]+-[0-9a-f]+"$/)
    expect(Buffer.from(await read.arrayBuffer()).equals(Buffer.from(bytes.slice(0, 100)))).toBe(true)
    // The same ETag is not modified; a change makes another.
    const etag = read.headers.get("etag")!
    expect((await get("/workspace/raw/bin.dat", { "if-none-match": etag })).status).toBe(304)
    await Bun.sleep(1100)
    await put("/workspace/raw/bin.dat", bytes.slice(0, 120))
    expect((await get("/workspace/raw/bin.dat", { "if-none-match": etag })).status).toBe(200)
  }, 60_000)

  it("ranges: a-b, a- and -n answer 206 with Content-Range; outside or malformed 416 with the size", async () => {
    const text = "0123456789abcdefghij"
    await put("/workspace/raw/range.txt", text)
    const cases: Array<[string, string, string]> = [["bytes=2-5", "2345", "bytes 2-5/20"], ["bytes=15-", "fghij", "bytes 15-19/20"], ["bytes=-3", "hij", "bytes 17-19/20"], ["bytes=18-99", "ij", "bytes 18-19/20"]]
    for (const [range, body, contentRange] of cases) {
      const res = await get("/workspace/raw/range.txt", { range })
      expect(res.status, range).toBe(206)
      expect(res.headers.get("content-range")).toBe(contentRange)
      expect(await res.text()).toBe(body)
    }
    for (const range of ["bytes=20-", "bytes=5-2", "bytes=-0", "items=0-1", "bytes=0-1,3-4", "bytes=-"]) {
      const res = await envelopeOf(await get("/workspace/raw/range.txt", { range }))
      expectEnvelope(res, 416, "range_not_satisfiable")
      expect(res.headers.get("content-range")).toBe("bytes */20")
    }
  }, 60_000)

  it("streams a file larger than one provider read, whole", async () => {
    // 12 MiB written inside the sandbox (a PUT takes at most the provider's 10 MiB write).
    await runProcess(http, auth, sandbox.id, ["sh", "-c", "mkdir -p /workspace/raw && head -c 12582912 /dev/urandom > /workspace/raw/big.bin"])
    const sum = (await runProcess(http, auth, sandbox.id, ["sha256sum", "/workspace/raw/big.bin"])).stdout.split(" ")[0]
    const res = await get("/workspace/raw/big.bin")
    expect(res.status, res.status === 200 ? "" : await res.clone().text()).toBe(200)
    // Longer than one read: streamed chunked (no Content-Length), flat in the gateway's memory.
    expect(res.headers.get("transfer-encoding")).toBe("chunked")
    expect(new Bun.CryptoHasher("sha256").update(await res.arrayBuffer()).digest("hex")).toBe(sum)
  }, 60_000)

  it("a file cut short while it streams never passes as whole: the response errors", async () => {
    await runProcess(http, auth, sandbox.id, ["sh", "-c", "mkdir -p /workspace/raw && head -c 67108864 /dev/urandom > /workspace/raw/shrinks.bin"])
    const res = await get("/workspace/raw/shrinks.bin")
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    let received = (await reader.read()).value?.length ?? 0
    // The client stops reading; the file loses most of its bytes in the sandbox meanwhile.
    await runProcess(http, auth, sandbox.id, ["truncate", "-s", "1048576", "/workspace/raw/shrinks.bin"])
    const rest = (async () => {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return "ended"
        received += value.length
      }
    })()
    // Ending cleanly would pass a short file as the whole one.
    await expect(rest).rejects.toThrow()
    expect(received).toBeLessThan(67108864)
  }, 60_000)

  it("serves a file of a directory too large to list whole (10,000 entries), and says a directory is one", async () => {
    await runProcess(http, auth, sandbox.id, ["sh", "-c", "mkdir -p /workspace/many/sub && cd /workspace/many && seq 10005 | xargs touch && printf found > target"])
    const res = await get("/workspace/many/target")
    expect(res.status).toBe(200)
    expect(await res.text()).toBe("found")
    expectEnvelope(await envelopeOf(await get("/workspace/many/sub")), 409, "is_a_directory")
    expectEnvelope(await envelopeOf(await get("/workspace/many/none")), 404, "file_not_found")
  }, 60_000)

  it("refuses what cannot be served: missing file, directory, bad path, oversize body, a mode the provider lacks, another tenant", async () => {
    expectEnvelope(await envelopeOf(await get("/workspace/raw/none")), 404, "file_not_found")
    expectEnvelope(await envelopeOf(await get("/workspace/raw")), 409, "is_a_directory")
    expectEnvelope(await envelopeOf(await get("/workspace/../etc/passwd")), 422, "validation_error")
    expectEnvelope(await envelopeOf(await get("relative/path")), 422, "validation_error")
    // Oversize bodies (413, nothing written): test/e2e/raw-streams.test.ts.
    expectEnvelope(await envelopeOf(await put("/workspace/raw/x", "a", "&mode=append")), 409, "capability_unsupported")
    expectEnvelope(await envelopeOf(await put("/workspace/raw/x", "a", "&mode=sideways")), 422, "validation_error")
    const asJson = await fetch(url("/workspace/raw/x"), { method: "PUT", headers: headers({ "content-type": "application/json" }), body: "{}" })
    expectEnvelope(await envelopeOf(asJson), 415, "unsupported_media_type")
    expectEnvelope(await envelopeOf(await put("/workspace/nested/deeper/x", "a")), 404, "file_not_found")
    const stranger = await bootstrap(server.dataDir, "raw-stranger@example.com")
    expectEnvelope(await envelopeOf(await get("/workspace/raw/range.txt", {}, { token: stranger.api_key, project: stranger.project_id })), 404, "not_found")
  }, 60_000)

  it("a symlink the sandbox plants resolves inside the sandbox, never on the host", async () => {
    await runProcess(http, auth, sandbox.id, ["ln", "-sf", "/../../../../../../etc/hostname", "/workspace/raw/escape"])
    const res = await get("/workspace/raw/escape")
    const body = res.status === 200 ? await res.text() : ""
    expect(body.trim()).not.toBe(os.hostname())
  }, 30_000)
})
