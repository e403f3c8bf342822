/**
 * Hostile registries (issue 22, findings 1 and 4), against test registries on loopback (test/support/registry.ts)
 * and the test DNS server (test/support/dns.ts), through the local runtime:
 *   - cached layers serve another pull only with proof of access: a manifest borrowing the digest of another
 *     organization's private layer gets nothing, whether its registry answers 404 for the blob, claims every
 *     blob on HEAD, or is the victim's own registry under another repository;
 *   - registry traffic passes the outbound address policy on every hop: an image reference naming a loopback
 *     port (or a name resolving to loopback or a metadata address) is refused before any connection, a redirect
 *     or a token realm on another loopback port is refused unless REGISTRY_ALLOW_PRIVATE, more than 5 redirects
 *     never, metadata addresses never.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import type { RuntimeError } from "../../src/runtime/LocalRuntime.ts"
import { failure, newRuntime, run, type TestRuntime } from "../runtime/support.ts"
import { type TestDns, testDns } from "../support/dns.ts"
import { startRegistry, type TestRegistry } from "../support/registry.ts"
import { tempDataDir } from "../support/server.ts"

const spec = (id: string, reference: string) => ({ id, vcpu: 1, memoryMb: 128, diskMb: 64, internet: false, image: { reference } })
const pullFailure = async (runtime: TestRuntime, id: string, reference: string) => {
  const e = (await failure(runtime.rt.create(spec(id, reference)))) as RuntimeError
  expect(e.kind).toBe("image_pull_failed")
  expect(fs.existsSync(path.join(runtime.dataDir, "sandboxes", id))).toBe(false)
  return e.message
}
const readText = async (runtime: TestRuntime, id: string, file: string) => Buffer.from((await run(runtime.rt.readFile(id, file, 0, 4096))).data).toString()
/** A layer no other test has: its digest is new to every cache. */
const uniqueLayer = () => [{ name: "unique", data: crypto.randomUUID() }]

/** A plain HTTP server on loopback that counts what reaches it. */
const countingServer = (answer: (request: Request) => Response) => {
  const seen: Array<{ path: string; authorization: string | null }> = []
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (request) => {
      seen.push({ path: new URL(request.url).pathname, authorization: request.headers.get("authorization") })
      return answer(request)
    }
  })
  return { port: server.port, seen, stop: () => void server.stop(true) }
}

describe("cached layers serve another pull only with proof of access", () => {
  // Organization A's private registry (credentials in the operator's REGISTRY_AUTH_FILE) and organization B's own.
  const victim = startRegistry({ credentials: { username: "robot", password: "s3cret" } })
  const attacker = startRegistry()
  const authDir = tempDataDir("oci-tenants-auth")
  const authFile = path.join(authDir, "auth.json")
  fs.writeFileSync(authFile, JSON.stringify({ auths: { [victim.host]: { auth: btoa("robot:s3cret") } } }))
  const shared = newRuntime("oci-tenants", { registryAuthFile: authFile, registryAllowPrivate: true })
  const secretLayer = [{ name: "secret/", type: "dir" as const }, { name: "secret/plans.txt", data: "organization A's private file\n" }]
  let secret: { digest: string; size: number }

  beforeAll(async () => {
    const pushed = victim.push("team-a/private", "1", { layers: [secretLayer] })
    secret = { digest: pushed.layers[0]!, size: victim.blob(pushed.layers[0]!)!.length }
    await run(shared.rt.create(spec("org-a", `${victim.host}/team-a/private:1`)))
    expect(await readText(shared, "org-a", "/secret/plans.txt")).toBe("organization A's private file\n")
  }, 60_000)
  afterAll(async () => {
    await shared.cleanup()
    victim.stop()
    attacker.stop()
    fs.rmSync(authDir, { recursive: true, force: true })
  })
  afterEach(() => {
    attacker.behaviour.claimEveryBlob = undefined
  })

  it("a manifest of another registry naming the private layer's digest (its registry answers 404 for it) fails", async () => {
    attacker.push("team-b/borrow", "1", { layers: [{ borrow: secret.digest, size: secret.size }] })
    expect(await pullFailure(shared, "org-b1", `${attacker.host}/team-b/borrow:1`)).toMatch(/missing a blob/)
  }, 60_000)

  it("…and fails when that registry claims every blob on HEAD: it must hand over the bytes itself", async () => {
    attacker.behaviour.claimEveryBlob = true
    attacker.push("team-b/claim", "1", { layers: [{ borrow: secret.digest, size: secret.size }] })
    expect(await pullFailure(shared, "org-b2", `${attacker.host}/team-b/claim:1`)).toMatch(/missing a blob/)
    expect(attacker.blobGets.get(secret.digest)).toBeGreaterThan(0)
  }, 60_000)

  it("…and fails on the victim's own registry under a repository that does not hold the blob (its HEAD answers 404)", async () => {
    victim.push("team-b/other", "1", { layers: [{ borrow: secret.digest, size: secret.size }] })
    const heads = victim.blobHeads.get(secret.digest) ?? 0
    expect(await pullFailure(shared, "org-b3", `${victim.host}/team-b/other:1`)).toMatch(/missing a blob/)
    expect(victim.blobHeads.get(secret.digest)).toBe(heads + 1)
  }, 60_000)

  it("a pull that has access reuses the layer: confirmed by a HEAD, not downloaded again; another registry that serves the same bytes proves it by sending them", async () => {
    const gets = victim.blobGets.get(secret.digest)
    await run(shared.rt.create(spec("org-a2", `${victim.host}/team-a/private:1`)))
    expect(victim.blobGets.get(secret.digest)).toBe(gets)
    expect(victim.blobHeads.get(secret.digest)).toBeGreaterThan(0)
    // The same content pushed to B's registry has the same digest: B had the bytes, so it gains nothing.
    attacker.push("team-b/same", "1", { layers: [secretLayer] })
    const sent = attacker.blobGets.get(secret.digest) ?? 0
    await run(shared.rt.create(spec("org-b4", `${attacker.host}/team-b/same:1`)))
    expect(attacker.blobGets.get(secret.digest)).toBe(sent + 1)
    expect(await readText(shared, "org-b4", "/secret/plans.txt")).toBe("organization A's private file\n")
    await run(shared.rt.destroy("org-a2"))
    await run(shared.rt.destroy("org-b4"))
  }, 90_000)
})

describe("registry requests pass the outbound address policy on every hop", () => {
  const registry = startRegistry()
  let dns: TestDns
  // Without REGISTRY_ALLOW_PRIVATE: registry names resolve through the test DNS server, never a real resolver.
  let strict: TestRuntime
  // Only the test registry may be on loopback (REGISTRY_PRIVATE_HOSTS), not every loopback port.
  const listed = newRuntime("oci-listed", { registryPrivateHosts: [registry.host] })
  const open = newRuntime("oci-open", { registryAllowPrivate: true })
  const store = countingServer((request) => {
    const bytes = registry.blob(new URL(request.url).pathname.slice(1))
    return bytes === undefined ? new Response("no such blob", { status: 404 }) : new Response(bytes)
  })
  const tokens = countingServer(() => Response.json({ token: registry.token }))

  beforeAll(async () => {
    dns = await testDns()
    strict = newRuntime("oci-strict", { registryDnsServers: [dns.server] })
  })
  afterAll(async () => {
    await strict.cleanup()
    await listed.cleanup()
    await open.cleanup()
    registry.stop()
    store.stop()
    tokens.stop()
  })
  afterEach(() => {
    registry.behaviour.blobRedirect = undefined
    registry.behaviour.realm = undefined
  })

  it("an image reference naming a loopback port, or a name resolving to loopback or metadata, is refused before any connection", async () => {
    const probe = countingServer(() => new Response("a service of the host"))
    try {
      dns.set("registry.rebind.test", ["127.0.0.1"])
      dns.set("registry.metadata.test", ["169.254.169.254"])
      const cases: ReadonlyArray<readonly [string, RegExp]> = [
        [`127.0.0.1:${probe.port}/x`, /loopback address \(127\.0\.0\.0\/8\).*REGISTRY_ALLOW_PRIVATE=true/],
        [`127.1:${probe.port}/x`, /loopback address/],
        [`localhost:${probe.port}/x`, /loopback name \(localhost\)/],
        [`[::1]:${probe.port}/x`, /loopback address \(::1\)/],
        [`registry.rebind.test:${probe.port}/x`, /registry\.rebind\.test resolves to 127\.0\.0\.1, a loopback address/],
        [`registry.metadata.test/x`, /resolves to 169\.254\.169\.254, a cloud metadata address/]
      ]
      for (const [i, [reference, reason]] of cases.entries()) {
        const message = await pullFailure(strict, `probe${i}`, reference)
        expect(message, reference).toMatch(reason)
        expect(message, reference).toMatch(/which image pulls may not target/)
      }
      expect(probe.seen).toEqual([])
      expect(dns.queries("registry.rebind.test")).toBeGreaterThan(0)
    } finally {
      probe.stop()
    }
  }, 60_000)

  it("a registry REGISTRY_PRIVATE_HOSTS names is reached; a blob redirect from it to another loopback port is not", async () => {
    registry.push("app/listed", "1", { layers: [uniqueLayer()] })
    await run(listed.rt.create(spec("listed1", `${registry.host}/app/listed:1`)))
    await run(listed.rt.destroy("listed1"))
    registry.push("app/redirected", "1", { layers: [uniqueLayer()] })
    registry.behaviour.blobRedirect = (digest) => `http://127.0.0.1:${store.port}/${digest}`
    const message = await pullFailure(listed, "listed2", `${registry.host}/app/redirected:1`)
    expect(message).toMatch(/the host 127\.0\.0\.1 is a loopback address.*REGISTRY_ALLOW_PRIVATE=true/)
    expect(store.seen).toEqual([])
  }, 60_000)

  it("a token realm on another loopback port is refused without REGISTRY_ALLOW_PRIVATE and fetched with it; one neither https nor on the registry's host never", async () => {
    registry.push("app/realm", "1", { layers: [uniqueLayer()] })
    registry.behaviour.realm = `http://127.0.0.1:${tokens.port}/token`
    expect(await pullFailure(listed, "realm1", `${registry.host}/app/realm:1`)).toMatch(/loopback address.*REGISTRY_ALLOW_PRIVATE=true/)
    expect(tokens.seen).toEqual([])
    await run(open.rt.create(spec("realm2", `${registry.host}/app/realm:1`)))
    expect(tokens.seen.length).toBeGreaterThan(0)
    await run(open.rt.destroy("realm2"))
    registry.push("app/realm-elsewhere", "1", { layers: [uniqueLayer()] })
    registry.behaviour.realm = `http://localhost:${tokens.port}/token`
    const before = tokens.seen.length
    expect(await pullFailure(open, "realm3", `${registry.host}/app/realm-elsewhere:1`)).toMatch(/token realm that is neither https nor on its own host/)
    expect(tokens.seen.length).toBe(before)
  }, 90_000)

  it("with REGISTRY_ALLOW_PRIVATE a blob redirect to another loopback port is followed, without the registry's credentials", async () => {
    registry.push("app/stored", "1", { layers: [uniqueLayer()] })
    registry.behaviour.blobRedirect = (digest) => `http://127.0.0.1:${store.port}/${digest}`
    await run(open.rt.create(spec("stored1", `${registry.host}/app/stored:1`)))
    expect(store.seen.length).toBeGreaterThan(0)
    for (const hit of store.seen) expect(hit.authorization).toBeNull()
    await run(open.rt.destroy("stored1"))
  }, 60_000)

  it("at most 5 redirects are followed; a redirect to a metadata address is refused whatever the setting", async () => {
    registry.push("app/hops", "1", { layers: [uniqueLayer()] })
    // The registry's answer is the first redirect; /redirect/<n>/ adds n more.
    registry.behaviour.blobRedirect = (digest) => `/redirect/4/${digest}`
    await run(open.rt.create(spec("hops5", `${registry.host}/app/hops:1`)))
    await run(open.rt.destroy("hops5"))
    registry.push("app/hops6", "1", { layers: [uniqueLayer()] })
    registry.behaviour.blobRedirect = (digest) => `/redirect/5/${digest}`
    expect(await pullFailure(open, "hops6", `${registry.host}/app/hops6:1`)).toMatch(/more than 5 redirects/)
    registry.behaviour.blobRedirect = () => "https://169.254.169.254/latest/meta-data/"
    expect(await pullFailure(open, "meta1", `${registry.host}/app/hops6:1`)).toMatch(/169\.254\.169\.254 is a cloud metadata address/)
  }, 90_000)
})
