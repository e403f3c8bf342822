/**
 * The webhook URL policy (every blocked address form, by default and with WEBHOOK_ALLOW_PRIVATE_TARGETS), DNS
 * answers checked as a whole, the connection pinned to the checked address (Host and TLS server name kept),
 * the retry schedule and Retry-After, and signature verification.
 */
import { describe, expect, it } from "vitest"
import { Effect, Fiber } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import type { WebhookConfigShape } from "../../src/Config.ts"
import { WebhookConfig } from "../../src/Config.ts"
import { signatureHeader, verifySignature } from "../../src/domain/WebhookSignature.ts"
import { parseRetryAfter, retryDelayMs } from "../../src/services/webhooks/Delivery.ts"
import { send } from "../../src/services/webhooks/Send.ts"
import { classifyAddress, parseIpv6 } from "../../src/domain/Addresses.ts"
import { type ResolvedAddress, ResolveError, type TargetCheck } from "../../src/net/Targets.ts"
import { checkTarget, WebhookResolver } from "../../src/services/webhooks/Targets.ts"

const CONFIG: WebhookConfigShape = {
  allowPrivateTargets: false,
  dnsServers: [],
  timeoutMs: 2000,
  maxAttempts: 8,
  retryBaseMs: 5000,
  retryMaxMs: 900_000,
  disableAfterSeconds: 86_400
}

/** A resolver that answers from a table and counts lookups; never a real DNS query. */
const tableResolver = (table: Record<string, ReadonlyArray<string>>) => {
  const lookups: Array<string> = []
  return {
    lookups,
    resolver: {
      resolve: (host: string) =>
        Effect.suspend(() => {
          lookups.push(host)
          const answers = table[host]
          return answers === undefined
            ? Effect.fail(new ResolveError(`${host} does not resolve (ENOTFOUND)`))
            : Effect.succeed(answers.map((address): ResolvedAddress => ({ address, family: address.includes(":") ? 6 : 4 })))
        })
    }
  }
}

const check = (url: string, options: { allowPrivate?: boolean; table?: Record<string, ReadonlyArray<string>> } = {}): Promise<TargetCheck> =>
  Effect.runPromise(checkTarget(url).pipe(
    Effect.provideService(WebhookConfig, { ...CONFIG, allowPrivateTargets: options.allowPrivate ?? false }),
    Effect.provideService(WebhookResolver, tableResolver(options.table ?? {}).resolver)
  ))

/** Every form item 4 of the issue names, each with the rule its refusal must name. */
const BLOCKED: ReadonlyArray<readonly [string, RegExp, "private" | "always"]> = [
  ["http://127.0.0.1/hook", /loopback/, "private"],
  ["http://127.1/hook", /loopback/, "private"],
  ["http://2130706433/hook", /loopback/, "private"], // decimal
  ["http://0177.0.0.1/hook", /loopback/, "private"], // octal
  ["http://0x7f.0.0.1/hook", /loopback/, "private"], // hex
  ["http://017700000001/hook", /loopback/, "private"], // one octal number
  ["http://127.0.0.1./hook", /loopback/, "private"],
  ["http://[::1]/hook", /loopback/, "private"],
  ["http://[0:0:0:0:0:0:0:1]/hook", /loopback/, "private"],
  ["http://[::ffff:127.0.0.1]/hook", /loopback.*IPv4-mapped/, "private"],
  ["http://[::ffff:7f00:1]/hook", /loopback.*IPv4-mapped/, "private"],
  ["http://[::127.0.0.1]/hook", /loopback/, "private"], // IPv4-compatible
  ["http://localhost:8080/hook", /localhost/, "private"],
  ["http://LOCALHOST./hook", /localhost/, "private"],
  ["http://api.localhost/hook", /localhost/, "private"],
  ["http://10.0.0.1/hook", /private address \(10\.0\.0\.0\/8\)/, "private"],
  ["http://172.16.5.4/hook", /private address \(172\.16\.0\.0\/12\)/, "private"],
  ["http://172.31.255.255/hook", /private/, "private"],
  ["http://192.168.1.1/hook", /private address \(192\.168/, "private"],
  ["http://3232235777/hook", /private/, "private"], // 192.168.1.1 in decimal
  ["http://[::ffff:192.168.1.1]/hook", /private.*IPv4-mapped/, "private"],
  ["http://[64:ff9b::a00:1]/hook", /private.*NAT64/, "private"], // 10.0.0.1 behind NAT64
  ["http://[2002:c0a8:101::1]/hook", /private.*6to4/, "private"], // 192.168.1.1 inside 6to4
  ["http://100.64.0.1/hook", /shared address space/, "private"],
  ["http://169.254.1.1/hook", /link-local/, "private"],
  ["http://[fe80::1]/hook", /link-local/, "private"],
  ["http://[fc00::1]/hook", /unique local/, "private"],
  ["http://[fd12:3456::1]/hook", /unique local/, "private"],
  ["http://[fec0::1]/hook", /site-local/, "private"],
  ["http://169.254.169.254/latest/meta-data", /metadata/, "always"],
  ["http://2852039166/latest", /metadata/, "always"], // 169.254.169.254 in decimal
  ["http://[::ffff:169.254.169.254]/latest", /metadata/, "always"],
  ["http://[::ffff:a9fe:a9fe]/latest", /metadata/, "always"],
  ["http://[fd00:ec2::254]/latest", /metadata/, "always"],
  ["http://100.100.100.200/latest", /metadata/, "always"],
  ["http://168.63.129.16/", /metadata/, "always"],
  ["http://metadata.google.internal/computeMetadata/v1/", /metadata/, "always"],
  ["http://0.0.0.0/hook", /unspecified/, "always"],
  ["http://0/hook", /unspecified/, "always"],
  ["http://[::]/hook", /unspecified/, "always"],
  ["http://224.0.0.1/hook", /multicast/, "always"],
  ["http://[ff02::1]/hook", /multicast/, "always"],
  ["http://255.255.255.255/hook", /reserved.*broadcast/, "always"],
  ["http://240.0.0.1/hook", /reserved/, "always"],
  ["http://192.0.2.10/hook", /documentation/, "always"],
  ["http://198.51.100.7/hook", /documentation/, "always"],
  ["http://203.0.113.9/hook", /documentation/, "always"],
  ["http://[2001:db8::1]/hook", /documentation/, "always"],
  ["http://198.18.0.1/hook", /benchmarking/, "always"],
  ["http://192.0.0.8/hook", /reserved/, "always"],
  ["http://[100::1]/hook", /discard/, "always"],
  ["http://[2001::1]/hook", /reserved/, "always"],
  ["http://[4000::1]/hook", /outside 2000::\/3/, "always"]
]

describe("URL policy", () => {
  it("refuses every loopback, private, link-local, reserved and metadata form by default, naming the rule", async () => {
    for (const [url, rule] of BLOCKED) {
      const result = await check(url)
      expect(result._tag, url).toBe("Refused")
      if (result._tag === "Refused") expect(result.reason, url).toMatch(rule)
    }
  })

  it("WEBHOOK_ALLOW_PRIVATE_TARGETS allows loopback, private and link-local, never metadata or unroutable addresses", async () => {
    for (const [url, , kind] of BLOCKED) {
      const result = await check(url, { allowPrivate: true, table: {} })
      expect(result._tag, url).toBe(kind === "private" && !url.includes("localhost") && !url.includes("LOCALHOST") ? "Allowed" : kind === "private" ? "Unresolved" : "Refused")
    }
    // A refusal by default says how an operator can allow it, only where the setting would.
    const loopback = await check("http://127.0.0.1/")
    expect(loopback._tag === "Refused" && loopback.reason).toMatch(/WEBHOOK_ALLOW_PRIVATE_TARGETS=true/)
    const metadata = await check("http://169.254.169.254/")
    expect(metadata._tag === "Refused" && metadata.reason).not.toMatch(/WEBHOOK_ALLOW_PRIVATE_TARGETS/)
  })

  it("allows public addresses and names that resolve only to public addresses, pinned to the address checked", async () => {
    expect(await check("https://93.184.215.14/hook")).toMatchObject({ _tag: "Allowed", target: { address: { address: "93.184.215.14", family: 4 } } })
    expect(await check("https://[2606:4700::1111]/hook")).toMatchObject({ _tag: "Allowed", target: { address: { address: "2606:4700::1111", family: 6 } } })
    const named = await check("https://Hooks.Example.com/x?y=1", { table: { "hooks.example.com": ["2606:4700::6810:84e5", "104.16.132.229"] } })
    expect(named).toMatchObject({ _tag: "Allowed", target: { hostname: "hooks.example.com", address: { address: "104.16.132.229", family: 4 } } })
  })

  it("judges a name by every address it resolves to: one private answer refuses it (DNS rebinding)", async () => {
    const rebinding = await check("https://hooks.example.com/x", { table: { "hooks.example.com": ["127.0.0.1"] } })
    expect(rebinding).toEqual({ _tag: "Refused", reason: expect.stringMatching(/hooks\.example\.com resolves to 127\.0\.0\.1, a loopback address/) })
    const mixed = await check("https://hooks.example.com/x", { table: { "hooks.example.com": ["104.16.132.229", "10.1.2.3"] } })
    expect(mixed._tag === "Refused" && mixed.reason).toMatch(/resolves to 10\.1\.2\.3, a private address/)
    const mapped = await check("https://hooks.example.com/x", { table: { "hooks.example.com": ["::ffff:169.254.169.254"] } })
    expect(mapped._tag === "Refused" && mapped.reason).toMatch(/metadata/)
    const unresolved = await check("https://nowhere.example/x")
    expect(unresolved).toEqual({ _tag: "Unresolved", reason: "nowhere.example does not resolve (ENOTFOUND)" })
    const badScheme = await check("ftp://example.com/")
    expect(badScheme._tag).toBe("Refused")
  })

  it("parses IPv6 forms and classifies public and non-public addresses", () => {
    expect(parseIpv6("::")).toEqual([0, 0, 0, 0, 0, 0, 0, 0])
    expect(parseIpv6("::ffff:1.2.3.4")).toEqual([0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304])
    expect(parseIpv6("1:2:3:4:5:6:1.2.3.4")).toEqual([1, 2, 3, 4, 5, 6, 0x0102, 0x0304])
    expect(parseIpv6("[2001:db8::1]")).toEqual([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1])
    expect(parseIpv6("1::2::3")).toBeUndefined()
    expect(parseIpv6("fe80::1%eth0")).toBeUndefined()
    expect(classifyAddress("8.8.8.8")).toBeUndefined()
    expect(classifyAddress("172.32.0.1")).toBeUndefined()
    expect(classifyAddress("100.128.0.1")).toBeUndefined()
    expect(classifyAddress("2a00:1450:4001::200e")).toBeUndefined()
    expect(classifyAddress("64:ff9b::808:808")).toBeUndefined() // 8.8.8.8 behind NAT64
    expect(classifyAddress("not an address")).toMatchObject({ private: false })
  })
})

describe("pinned connection", () => {
  it("connects to the checked address with the URL's host name in Host (no second lookup)", async () => {
    const seen: Array<{ host: string | null; url: string }> = []
    const receiver = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: (req) => {
      seen.push({ host: req.headers.get("host"), url: new URL(req.url).pathname + new URL(req.url).search })
      return new Response("x".repeat(10_000), { status: 503, headers: { "retry-after": "7" } })
    } })
    try {
      const { lookups, resolver } = tableResolver({ "hooks.pinned.test": ["127.0.0.1"] })
      const checked = await Effect.runPromise(checkTarget(`http://hooks.pinned.test:${receiver.port}/in?k=v`).pipe(
        Effect.provideService(WebhookConfig, { ...CONFIG, allowPrivateTargets: true }),
        Effect.provideService(WebhookResolver, resolver)
      ))
      if (checked._tag !== "Allowed") throw new Error(`not allowed: ${JSON.stringify(checked)}`)
      // `.test` names resolve nowhere but in this table: had fetch looked the name up itself, it would fail.
      const result = await Effect.runPromise(send({ target: checked.target, headers: { "content-type": "application/json" }, body: "{}", timeoutMs: 2000 }))
      expect(result).toEqual({ _tag: "Response", status: 503, retryAfter: "7", snippet: "x".repeat(4096) })
      expect(seen).toEqual([{ host: `hooks.pinned.test:${receiver.port}`, url: "/in?k=v" }])
      expect(lookups).toEqual(["hooks.pinned.test"])
    } finally {
      receiver.stop(true)
    }
  })

  it("an interrupted attempt closes its connection at once, not at its deadline (the fiber's abort signal reaches the fetch)", async () => {
    // A receiver that takes the request and never answers: only an abort ends the exchange before its deadline.
    let requested!: () => void
    let closed!: () => void
    const gotRequest = new Promise<void>((resolve) => (requested = resolve))
    const gotClose = new Promise<void>((resolve) => (closed = resolve))
    const receiver = net.createServer((socket) => {
      socket.once("data", () => requested())
      socket.on("close", () => closed())
      socket.on("error", () => {})
    })
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
    try {
      const port = (receiver.address() as net.AddressInfo).port
      const target = { url: new URL(`http://127.0.0.1:${port}/in`), hostname: "127.0.0.1", address: { address: "127.0.0.1", family: 4 as const } }
      const attempt = Effect.runFork(send({ target, headers: { "content-type": "application/json" }, body: "{}", timeoutMs: 10 * 60_000 }))
      await gotRequest
      await Effect.runPromise(Fiber.interrupt(attempt))
      // Without the signal the connection would stay open until the ten-minute deadline (and this test time out).
      await gotClose
    } finally {
      receiver.close()
    }
  }, 15_000)

  it("keeps the TLS server name: the certificate is checked against the URL's host, not the address", async () => {
    // A certificate for hooks.test only (test/fixtures, valid for a century), trusted through NODE_EXTRA_CA_CERTS.
    const fixtures = path.resolve(import.meta.dirname, "../fixtures")
    const receiver = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      tls: { cert: fs.readFileSync(path.join(fixtures, "hooks-test.crt"), "utf8"), key: fs.readFileSync(path.join(fixtures, "hooks-test.key"), "utf8") },
      fetch: (req) => new Response(`host=${req.headers.get("host")}`)
    })
    try {
      const script = `
        import { Effect } from "effect"
        import { send } from ${JSON.stringify(path.resolve(import.meta.dirname, "../../src/services/webhooks/Send.ts"))}
        const target = (name) => ({ url: new URL("https://" + name + ":${receiver.port}/h"), hostname: name, address: { address: "127.0.0.1", family: 4 } })
        const a = await Effect.runPromise(send({ target: target("hooks.test"), headers: {}, body: "{}", timeoutMs: 5000 }))
        const b = await Effect.runPromise(send({ target: target("other.test"), headers: {}, body: "{}", timeoutMs: 5000 }))
        console.log(JSON.stringify([a, b]))`
      const child = Bun.spawn(["bun", "-e", script], {
        cwd: path.resolve(import.meta.dirname, "../.."),
        env: { ...process.env, NODE_EXTRA_CA_CERTS: path.join(fixtures, "hooks-test.crt") },
        stdout: "pipe",
        stderr: "pipe"
      })
      const [out, err] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
      const [a, b] = JSON.parse(out.trim().split("\n").pop() || "[null, null]")
      expect(a, err).toEqual({ _tag: "Response", status: 200, retryAfter: null, snippet: `host=hooks.test:${receiver.port}` })
      expect(b._tag, err).toBe("NoResponse")
    } finally {
      receiver.stop(true)
    }
  })
})

describe("retries and signatures", () => {
  it("backs off min(base × 2^(n−1), max) × [0.5, 1.5), honouring a larger Retry-After up to 10 minutes", () => {
    const low = () => 0
    const high = () => 0.999999
    expect(retryDelayMs(1, undefined, CONFIG, low)).toBe(2500)
    expect(retryDelayMs(1, undefined, CONFIG, high)).toBe(7500)
    expect(retryDelayMs(3, undefined, CONFIG, low)).toBe(10_000)
    expect(retryDelayMs(8, undefined, CONFIG, high)).toBe(900_000) // capped at 15 minutes
    expect(retryDelayMs(1, 120_000, CONFIG, low)).toBe(120_000)
    expect(retryDelayMs(1, 1000, CONFIG, low)).toBe(2500) // a smaller Retry-After changes nothing
    expect(retryDelayMs(1, 3_600_000, CONFIG, low)).toBe(600_000)
    expect(retryDelayMs(1, 3_600_000, { retryBaseMs: 20, retryMaxMs: 100 }, low)).toBe(100)
    const now = Date.parse("2026-01-01T00:00:00Z")
    expect(parseRetryAfter("120", now)).toBe(120_000)
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:01:00 GMT", now)).toBe(60_000)
    expect(parseRetryAfter("soon", now)).toBeUndefined()
    expect(parseRetryAfter(null, now)).toBeUndefined()
  })

  it("the webhooks guide's verification snippet accepts a delivery's signature and refuses a tampered one", async () => {
    const readme = fs.readFileSync(path.resolve(import.meta.dirname, "../../docs/guide/webhooks.md"), "utf8")
    const code = /<!-- verify-webhook -->\n```ts\n([\s\S]*?)\n```/.exec(readme)?.[1]
    expect(code).toBeDefined()
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sgw-readme-")), "verify.ts")
    fs.writeFileSync(file, code!)
    const { verifyWebhook } = (await import(file)) as { verifyWebhook: (secret: string, headers: Headers, body: string) => boolean }
    const secret = "whsec_readme0123456789abcdefghijklmnopqrstuvwxyzAB"
    const body = JSON.stringify({ type: "process.completed", data: { exit_code: 0 } })
    const t = Math.floor(Date.now() / 1000)
    const headers = (deliveryId: string, at = t) => new Headers({
      "metal-delivery-id": deliveryId,
      "metal-signature-timestamp": String(at),
      "metal-signature": signatureHeader(secret, at, "dlv-1", body)
    })
    expect(verifyWebhook(secret, headers("dlv-1"), body)).toBe(true)
    expect(verifyWebhook(secret, headers("dlv-2"), body)).toBe(false)
    expect(verifyWebhook(secret, headers("dlv-1"), body.replace("0", "1"))).toBe(false)
    expect(verifyWebhook(`${secret}x`, headers("dlv-1"), body)).toBe(false)
    expect(verifyWebhook(secret, headers("dlv-1", t - 600), body)).toBe(false)
  })

  it("a signature verifies with its secret, delivery id, body and a fresh timestamp only", () => {
    const secret = "whsec_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
    const body = JSON.stringify({ type: "sandbox.ready" })
    const t = 1_800_000_000
    const signature = signatureHeader(secret, t, "d-1", body)
    const ok = { secret, deliveryId: "d-1", body, signature, timestamp: String(t), nowSeconds: t + 10 }
    expect(verifySignature(ok)).toBe(true)
    expect(verifySignature({ ...ok, secret: `${secret}x` })).toBe(false)
    expect(verifySignature({ ...ok, body: body.replace("ready", "failed") })).toBe(false)
    expect(verifySignature({ ...ok, deliveryId: "d-2" })).toBe(false)
    expect(verifySignature({ ...ok, nowSeconds: t + 301 })).toBe(false)
    expect(verifySignature({ ...ok, timestamp: String(t + 1) })).toBe(false)
    expect(verifySignature({ ...ok, signature: signature.replace(/v1=./, "v1=0") })).toBe(false)
  })
})
