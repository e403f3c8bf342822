/** The provider kit: the wire helper, rate-card cost, polling, the emulator router and persistent books. */
import { FetchHttpClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Either, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { describe, expect, it } from "vitest"
import { rateCardCost } from "./cost.ts"
import { decodeJsonBody, makeRouter, route } from "./emulator/server.ts"
import { persistentRecords, persistentState } from "./emulator/state.ts"
import { pollUntil } from "./poll.ts"
import { bufferedEvents, FOLLOWED_EXECUTIONS, type ProviderError, reattachFailed } from "../../src/providers/Provider.ts"
import { json, scripted } from "../testing/scripted-client.ts"
import { exactBody, makeWire, messageOf, plainHttpClient, rangeOfWhole } from "./wire.ts"
import { openUpstream } from "../../src/providers/websocket.ts"
import { atMostEvery, sweepEvery } from "./emulator/state.ts"

const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>) => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (Either.isRight(result)) throw new Error("expected a failure")
  return result.left
}

describe("wire", () => {
  const get = HttpClientRequest.get("http://provider.test/things/1")
  const post = HttpClientRequest.post("http://provider.test/things")
  const Thing = Schema.Struct({ id: Schema.String })

  it("decodes a 2xx body with the schema; another shape is an unavailable provider, not a crash", async () => {
    const s = scripted([
      { method: "GET", path: "/things/1", reply: () => json({ id: "t1" }) },
      { method: "GET", path: "/things/1", reply: () => json({ name: "no id" }) }
    ])
    const wire = makeWire({ provider: "daytona", client: s.client, timeout: "1 second" })
    expect(await Effect.runPromise(wire.call(get, Thing, "get thing"))).toEqual({ id: "t1" })
    const e = await failureOf(wire.call(get, Thing, "get thing"))
    expect(e.kind).toBe("unavailable")
    expect(e.message).toContain("daytona get thing sent an unexpected body")
  })

  it("classifies statuses, and lets the adapter's classifier override the kind and name a code", async () => {
    const cases: Array<[Response, string, string | undefined]> = [
      [json({ message: "no key" }, 401), "auth", undefined],
      [json({ message: "slow" }, 429), "capacity", undefined],
      [json({ message: "gone" }, 404), "not_found", undefined],
      [json({ message: "busy" }, 409), "customer", undefined],
      [json({ message: "bad" }, 422), "invalid_request", undefined],
      [json({ message: "down" }, 503), "unavailable", undefined],
      [new Response("<html>bad gateway</html>", { status: 502 }), "unavailable", undefined],
      [json({ message: "full", code: "NO_ROOM" }, 400), "capacity", "NO_ROOM"]
    ]
    for (const [reply, kind, code] of cases) {
      const s = scripted([{ method: "GET", path: "/things/1", reply: () => reply.clone() }])
      const wire = makeWire({
        provider: "e2b",
        client: s.client,
        timeout: "1 second",
        classify: (answer) => {
          const c = (answer.json as { code?: string } | undefined)?.code
          return { message: messageOf(answer), kind: c === "NO_ROOM" ? "capacity" : undefined, code: c }
        }
      })
      const e = await failureOf(wire.send(get, "get thing"))
      expect([e.kind, e.status]).toEqual([kind, reply.status])
      expect(e.message).toContain(`e2b get thing answered ${reply.status}`)
      if (code !== undefined) expect(e.message).toContain(code)
    }
  })

  it("an ambiguous call's 500/502/504 and a mutating call's lost answer are unknown outcomes; a read's are not", async () => {
    const s = scripted([
      { method: "POST", path: "/things", reply: () => json({ message: "oops" }, 504) },
      { method: "POST", path: "/things", reply: () => "transport-error" },
      { method: "GET", path: "/things/1", reply: () => "transport-error" },
      { method: "POST", path: "/things", reply: () => json({ message: "oops" }, 504) }
    ])
    const wire = makeWire({ provider: "e2b", client: s.client, timeout: "1 second" })
    expect((await failureOf(wire.send(post, "create", { ambiguous: true }))).kind).toBe("unknown_outcome")
    expect((await failureOf(wire.send(post, "create"))).kind).toBe("unknown_outcome")
    expect((await failureOf(wire.send(get, "read"))).kind).toBe("unavailable")
    expect((await failureOf(wire.send(post, "create"))).kind).toBe("unavailable")
  })

  it("an accepted status is an answer; a deadline ends a call that does not answer", async () => {
    const s = scripted([
      { method: "GET", path: "/things/1", reply: () => new Response(null, { status: 416 }) },
      { method: "GET", path: "/things/1", reply: () => new Promise<Response>(() => {}) }
    ])
    const wire = makeWire({ provider: "e2b", client: s.client, timeout: "50 millis" })
    expect((await Effect.runPromise(wire.send(get, "read", { accept: (status) => status === 416 }))).status).toBe(416)
    const e = await failureOf(wire.send(get, "read"))
    expect([e.kind, e.message]).toEqual(["unavailable", "e2b read timed out"])
  })
})

describe("compressed answers (a provider's answers carry its sandboxes' bytes)", () => {
  /** 64 MiB of zeros gzipped (~64 KB), declared with its Content-Length and Content-Encoding; says what Accept-Encoding it was asked with. */
  const bomb = zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024))
  const serveBomb = () =>
    Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (request) =>
        new Response(bomb, { headers: { "content-encoding": "gzip", "content-length": String(bomb.length), "x-asked": request.headers.get("accept-encoding") ?? "nothing" } })
    })
  const inflating = Effect.runSync(Effect.provide(HttpClient.HttpClient, FetchHttpClient.layer))

  it("the adapters' client never asks for compression nor inflates; `send` refuses an answer that declares an encoding, whatever the client", async () => {
    const server = serveBomb()
    try {
      const raw = await Effect.runPromise(Effect.scoped(Effect.flatMap(plainHttpClient().get(server.url.href), (r) => Effect.map(r.arrayBuffer, (b) => [r.headers["x-asked"], b.byteLength]))))
      expect(raw).toEqual(["nothing", bomb.length])
      for (const client of [plainHttpClient(), inflating]) {
        const e = await failureOf(makeWire({ provider: "e2b", client, timeout: "5 seconds" }).send(HttpClientRequest.get(server.url.href), "read file"))
        expect(e.kind).toBe("unavailable")
        expect(e.message).toBe("e2b read file answered with Content-Encoding gzip, which was not asked for")
      }
    } finally {
      server.stop(true)
    }
  })

  it("exactBody: a Content-Length of the encoded bytes never lets the decoded ones through uncounted", async () => {
    const server = serveBomb()
    try {
      const body = await Effect.runPromise(Effect.map(inflating.get(server.url.href), (r) => exactBody(r, bomb.length, "test download")))
      const read = await new Response(body).arrayBuffer().then((b) => `${b.byteLength} bytes read`, (e: Error) => e.message)
      expect(read).toBe(`test download: more than the ${bomb.length} bytes asked for`)
    } finally {
      server.stop(true)
    }
  })
})

describe("compressed WebSocket messages", () => {
  it("an upstream WebSocket is opened without permessage-deflate: a server that would compress cannot", async () => {
    let offered: string | null = "not asked"
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (request, s) => {
        offered = request.headers.get("sec-websocket-extensions")
        return s.upgrade(request) ? undefined : new Response("no", { status: 400 })
      },
      websocket: { perMessageDeflate: true, message: () => {} }
    })
    try {
      const socket = await openUpstream(`ws://127.0.0.1:${server.port}/`, new Request("http://client/", { headers: { "sec-websocket-extensions": "permessage-deflate" } }))
      expect(offered).toBeNull()
      expect(socket.extensions).toBe("")
      socket.close()
    } finally {
      server.stop(true)
    }
  })
})

describe("rate card", () => {
  it("prices vCPU, memory and disk beyond the free part per second over the window", () => {
    const card = { version: "v1", vcpuSecondMicrousd: 10, gibSecondMicrousd: 2, diskGibSecondMicrousd: 1, freeDiskGib: 5, confidence: "low" as const }
    const resources = { vcpu: 2, memoryMb: 2048, diskMb: 10 * 1024, architecture: "x86_64", providerSize: null }
    const cost = rateCardCost(card, resources, { from: "2026-01-01T00:00:00Z", to: "2026-01-01T00:01:40Z" })
    // 100 s × (2×10 + 2×2 + 5×1) = 2,900
    expect(cost).toEqual({ amountMicrousd: 2900n, measuredThrough: "2026-01-01T00:01:40Z", provenance: "estimated_rate_card", confidence: "low", rateCardVersion: "v1" })
    expect(rateCardCost(card, resources, { from: "2026-01-01T00:01:00Z", to: "2026-01-01T00:00:00Z" }).amountMicrousd).toBe(0n)
  })
})

describe("pollUntil", () => {
  it("asks again until the answer is Some, and fails at the deadline with the caller's error", async () => {
    let asked = 0
    const ready = pollUntil(Effect.sync(() => (++asked >= 3 ? Option.some(asked) : Option.none())), { interval: "5 millis", timeout: "1 second", onTimeout: () => "late" })
    expect(await Effect.runPromise(ready)).toBe(3)
    const never = pollUntil(Effect.succeed(Option.none<number>()), { interval: "5 millis", timeout: "40 millis", onTimeout: () => "late" })
    expect(await Effect.runPromise(Effect.flip(never))).toBe("late")
    const broken = pollUntil(Effect.fail("gone"), { interval: "5 millis", timeout: "1 second", onTimeout: () => "late" })
    expect(await Effect.runPromise(Effect.flip(broken))).toBe("gone")
  })
})

describe("emulator router", () => {
  const router = makeRouter<string>([
    route("GET", "/sandbox/:id", (ctx, p) => Response.json({ ctx, ...p })),
    route("POST", "/sandbox/:id/ports/:port/expire", (_ctx, p) => Response.json(p)),
    route("*", "/preview/:token/*rest", (_ctx, p) => Response.json(p))
  ])
  const body = async (found: ReturnType<typeof router.match>) => {
    if (found._tag !== "Found") return found._tag
    return (await found.handle("c")).json()
  }

  it("matches literals and parameters (decoded), a trailing rest, and tells a wrong method from no route", async () => {
    expect(await body(router.match("GET", "/sandbox/a%20b"))).toEqual({ ctx: "c", id: "a b" })
    expect(await body(router.match("POST", "/sandbox/s1/ports/80/expire"))).toEqual({ id: "s1", port: "80" })
    expect(await body(router.match("PUT", "/preview/tok/a/b"))).toEqual({ token: "tok", rest: "a/b" })
    expect(await body(router.match("GET", "/preview/tok"))).toEqual({ token: "tok", rest: "" })
    expect(await body(router.match("DELETE", "/sandbox/s1"))).toBe("MethodNotAllowed")
    expect(await body(router.match("GET", "/sandbox/s1/extra"))).toBe("NotFound")
    expect(await body(router.match("GET", "/sandbox/%E0%A4%A"))).toBe("NotFound")
  })
})

describe("persistent books", () => {
  const Books = Schema.mutable(Schema.Struct({ count: Schema.Number, names: Schema.optionalWith(Schema.mutable(Schema.Array(Schema.String)), { default: () => [] }) }))
  const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "kit-books-"))

  it("saves atomically (0600) and reads back through the schema, with defaults for what older files lack", () => {
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, "state.json"), JSON.stringify({ count: 1 }))
    const first = persistentState(dir, Books, () => ({ count: 0, names: [] }))
    expect(first.state).toEqual({ count: 1, names: [] })
    first.state.names.push("a")
    first.save()
    expect(fs.statSync(path.join(dir, "state.json")).mode & 0o777).toBe(0o600)
    expect(persistentState(dir, Books, () => ({ count: 0, names: [] })).state).toEqual({ count: 1, names: ["a"] })
    fs.rmSync(dir, { recursive: true })
  })

  it("moves an unreadable file aside and starts from the initial state", () => {
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, "state.json"), JSON.stringify({ count: "many" }))
    const books = persistentState(dir, Books, () => ({ count: 0, names: [] }))
    expect(books.state).toEqual({ count: 0, names: [] })
    expect(fs.readdirSync(dir).some((f) => f.startsWith("state.json.unreadable-"))).toBe(true)
    fs.rmSync(dir, { recursive: true })
  })

  it("keeps records one file each; a record that does not decode is dropped", () => {
    const dir = tempDir()
    const records = persistentRecords(dir, "sessions", Schema.Struct({ n: Schema.Number }))
    records.set("a", { n: 1 })
    records.set("b", { n: 2 })
    records.delete("b")
    fs.writeFileSync(path.join(dir, "sessions", "broken.json"), "{\"key\": \"c\", \"value\": {\"n\": \"x\"}}")
    expect(persistentRecords(dir, "sessions", Schema.Struct({ n: Schema.Number })).entries()).toEqual([["a", { n: 1 }]])
    fs.rmSync(dir, { recursive: true })
  })
})

describe("decodeJsonBody (the emulators' request bodies)", () => {
  const Body = Schema.Struct({ name: Schema.String })
  const req = (body: string) => new Request("http://emulator/x", { method: "POST", body })
  it("decodes the schema's shape, ignoring unknown keys; refuses what is not JSON, another shape; empty is {} only when asked", async () => {
    expect(await decodeJsonBody(req('{"name":"a"}'), Body)).toEqual({ ok: true, value: { name: "a" } })
    expect(await decodeJsonBody(req("{"), Body)).toEqual({ ok: false, problem: "json", message: "the request body is not valid JSON" })
    expect(await decodeJsonBody(req('{"name":1}'), Body)).toMatchObject({ ok: false, problem: "shape", message: expect.stringMatching(/^invalid request body: /) })
    // The providers' APIs accept fields they do not know (SDKs send newer ones): so does an emulator.
    expect(await decodeJsonBody(req('{"name":"a","x":1}'), Body)).toEqual({ ok: true, value: { name: "a" } })
    expect(await decodeJsonBody(req(""), Body)).toMatchObject({ ok: false, problem: "json" })
    expect(await decodeJsonBody(req(""), Schema.Struct({}), { emptyIsObject: true })).toEqual({ ok: true, value: {} })
    const long = await decodeJsonBody(req(JSON.stringify({ name: ["x".repeat(1000)] })), Body)
    expect(!long.ok && long.message.length).toBeLessThanOrEqual("invalid request body: ".length + 300)
  })
  it("refuses a field of the provider's API that the emulator cannot honour, when it is set", async () => {
    const unhonoured = { volumes: "volumes are not served by this emulator" }
    expect(await decodeJsonBody(req('{"name":"a","volumes":[{"id":"v"}]}'), Body, { unhonoured })).toEqual({
      ok: false,
      problem: "unhonoured",
      message: "volumes: volumes are not served by this emulator"
    })
    expect(await decodeJsonBody(req('{"name":"a","volumes":null}'), Body, { unhonoured })).toEqual({ ok: true, value: { name: "a" } })
    expect(await decodeJsonBody(req('{"name":"a"}'), Body, { unhonoured })).toEqual({ ok: true, value: { name: "a" } })
  })
})

describe("rangeOfWhole: a ranged read answered from a whole file's bytes", () => {
  const body = new Uint8Array([0, 1, 2, 3, 4, 5])
  it("cuts the range, says the size and whether it reached the end; past the end is empty", () => {
    expect(rangeOfWhole(body, 1, 2)).toEqual({ data: new Uint8Array([1, 2]), offsetBytes: 1, sizeBytes: 6, eof: false })
    expect(rangeOfWhole(body, 4, 100)).toEqual({ data: new Uint8Array([4, 5]), offsetBytes: 4, sizeBytes: 6, eof: true })
    expect(rangeOfWhole(body, 9, 3)).toEqual({ data: new Uint8Array(), offsetBytes: 9, sizeBytes: 6, eof: true })
    expect(rangeOfWhole(body, 0, 0)).toEqual({ data: new Uint8Array(), offsetBytes: 0, sizeBytes: 6, eof: false })
  })
})

describe("atMostEvery: an emulator's clean-up when its books are touched, not on each touch", () => {
  it("runs at the first call, not again within its period, and again after it", async () => {
    const runs: Array<number> = []
    const prune = atMostEvery(30, (now) => runs.push(now))
    prune()
    prune()
    expect(runs).toHaveLength(1)
    await Bun.sleep(40)
    prune()
    expect(runs).toHaveLength(2)
    expect(runs[1]! - runs[0]!).toBeGreaterThan(30)
  })
})

describe("sweepEvery: an emulator's timers", () => {
  it("sweeps one at a time (a tick while one runs does nothing), at once when asked, survives a failing sweep, and stops", async () => {
    let started = 0
    let running = 0
    let overlapped = false
    const sweeper = sweepEvery(5, async () => {
      started++
      overlapped ||= running > 0
      running++
      await Bun.sleep(20)
      running--
      if (started === 1) throw new Error("a sweep that fails")
    }, { atOnce: true })
    expect(started).toBe(1) // at once, before the first tick
    await Bun.sleep(120)
    sweeper.stop()
    const after = started
    expect(after).toBeGreaterThan(1) // went on after the failure
    expect(overlapped).toBe(false)
    await Bun.sleep(60)
    expect(started).toBe(after)
  })
})

describe("bufferedEvents: a finished execution's buffered output as events", () => {
  const text = (e: { type: string; data?: Uint8Array }) => (e.data === undefined ? e.type : `${e.type}:${new TextDecoder().decode(e.data)}`)
  it("stdout then stderr then the exit, numbered from 0; an empty stream has no event", () => {
    const events = bufferedEvents({ stdout: "out", stderr: "" }, { exitCode: 0, signal: null }, 100)
    expect(events.map(text)).toEqual(["stdout:out", "exit"])
    expect(events.map((e) => e.seq)).toEqual([0, 1])
    expect(events.at(-1)).toMatchObject({ exitCode: 0, signal: null, cancelled: false, timedOut: false, outputTruncated: false })
  })
  it("cuts at the output limit (stderr gets what stdout left) and says so; the provider's own cut is kept", () => {
    const cut = bufferedEvents({ stdout: "abcd", stderr: "efgh" }, { exitCode: 1, signal: null, timedOut: true }, 6)
    expect(cut.map(text)).toEqual(["stdout:abcd", "stderr:ef", "exit"])
    expect(cut.at(-1)).toMatchObject({ timedOut: true, outputTruncated: true })
    expect(bufferedEvents({ stdout: "a", stderr: "b" }, { exitCode: null, signal: "SIGTERM", cancelled: true }, 10, true).at(-1)).toMatchObject({ cancelled: true, outputTruncated: true })
  })
})

describe("exactBody: a download held to its length", () => {
  const MiB = 1024 * 1024
  /** A server answering `sent` bytes: framed by a Content-Length of `stated`, or chunked when none is stated. */
  const serve = (sent: number, stated?: number) =>
    Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: () => {
        const piece = new Uint8Array(MiB).fill(7)
        let left = sent
        const body = new ReadableStream<Uint8Array>({
          pull: async (c) => {
            if (left <= 0) return c.close()
            await Bun.sleep(2)
            const n = Math.min(left, piece.length)
            left -= n
            c.enqueue(piece.subarray(0, n))
          }
        })
        // A stated length goes out as Content-Length only for a body of known size (Bun chunks streams).
        return stated === undefined ? new Response(body) : new Response(new Uint8Array(sent).fill(7), { headers: { "content-length": String(stated) } })
      }
    })
  const download = (url: string, length: number) =>
    Effect.runPromise(Effect.map(Effect.flatMap(HttpClient.HttpClient, (c) => c.get(url)).pipe(Effect.provide(FetchHttpClient.layer)), (r) => exactBody(r, length, "test download")))
  const drain = async (body: ReadableStream<Uint8Array>) => {
    let total = 0
    let collectedAt = 0
    for await (const chunk of body) {
      total += chunk.length
      // The response object is gone from here on: the collector must not abort the request under the body. A full
      // collection every 4 MiB (a dozen per body): one per chunk took a minute in the suite's large shared heap.
      if (total - collectedAt >= 4 * MiB) {
        collectedAt = total
        Bun.gc(true)
      }
    }
    return total
  }

  it("a body framed by its exact Content-Length passes as fetch gives it, and outlives a collection of its response", async () => {
    const server = serve(48 * MiB, 48 * MiB)
    try {
      expect(await drain(await download(server.url.href, 48 * MiB))).toBe(48 * MiB)
    } finally {
      server.stop(true)
    }
  })

  it("handed to a server's response (as the gateway does), it streams whole while the collector runs", async () => {
    const upstream = serve(48 * MiB, 48 * MiB)
    const gateway = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: async () => new Response(await download(upstream.url.href, 48 * MiB)) })
    const collect = setInterval(() => Bun.gc(true), 5)
    try {
      const res = await fetch(gateway.url)
      let total = 0
      for await (const chunk of res.body!) {
        total += chunk.length
        await Bun.sleep(1)
      }
      expect(total).toBe(48 * MiB)
    } finally {
      clearInterval(collect)
      gateway.stop(true)
      upstream.stop(true)
    }
  })

  it("a chunked body is counted: exactly the length passes; a short one or a long one errors instead of ending", async () => {
    for (const [sent, asked, ok] of [[24 * MiB, 24 * MiB, true], [24 * MiB - 1, 24 * MiB, false], [24 * MiB + 1, 24 * MiB, false]] as const) {
      const server = serve(sent)
      try {
        const read = drain(await download(server.url.href, asked))
        if (ok) expect(await read).toBe(asked)
        else await expect(read).rejects.toThrow(/test download/)
      } finally {
        server.stop(true)
      }
    }
  })
})

describe("reattachFailed: a followed execution's re-attach that failed as unavailable", () => {
  it("waits the back-off before the next try, and gives up only after failing for longer than the give-up time", () => {
    const followed = { retryAt: 0, failingSince: null as number | null }
    const before = Date.now()
    expect(reattachFailed(followed)).toBe(false)
    expect(followed.failingSince).toBeGreaterThanOrEqual(before)
    expect(followed.retryAt - followed.failingSince!).toBe(FOLLOWED_EXECUTIONS.reattachBackoffMs)
    followed.failingSince = Date.now() - FOLLOWED_EXECUTIONS.reattachGiveUpMs - 1
    expect(reattachFailed(followed)).toBe(true)
  })
})
