/**
 * Webhook delivery end to end: a real server, real receivers on loopback (WEBHOOK_ALLOW_PRIVATE_TARGETS=true),
 * host names answered by the test's own DNS server (support/dns.ts), short configured retry intervals instead of
 * waiting. Signatures with the secret from create and after rotation; 500, 500, 200 as one delivery of three
 * attempts; a 410 and a redirect failing at once; a receiver that never answers, retried with backoff until its
 * endpoint is disabled; the delivery routes and their roles; the URL policy over HTTP on a default server,
 * DNS rebinding included.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifySignature } from "../../src/domain/WebhookSignature.ts"
import { joinAs } from "../support/accounts.ts"
import { type TestDns, testDns } from "../support/dns.ts"
import { poll } from "../support/sandbox.ts"
import { api, type Bootstrap, bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"
import { type Receiver, startReceiver } from "../support/webhooks.ts"

const ATTEMPT_TIMEOUT_MS = 400
const RETRY_BASE_MS = 20
const RETRY_MAX_MS = 100

let server: RunningServer
let http: ReturnType<typeof api>
let owner: Bootstrap
let outsider: Bootstrap
let receiver: Receiver
let dns: TestDns

beforeAll(async () => {
  dns = await testDns()
  server = await startServer({
    env: {
      WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
      WEBHOOK_TIMEOUT_MS: String(ATTEMPT_TIMEOUT_MS),
      WEBHOOK_RETRY_BASE_MS: String(RETRY_BASE_MS),
      WEBHOOK_RETRY_MAX_MS: String(RETRY_MAX_MS),
      WEBHOOK_DISABLE_AFTER_SECONDS: "1"
    }
  })
  http = api(server.url)
  ;[owner, outsider] = await Promise.all([bootstrap(server.dataDir, "hooks@example.com"), bootstrap(server.dataDir, "hooks-outsider@example.com")])
  receiver = startReceiver()
})
afterAll(async () => {
  receiver.stop()
  await server.stop()
})

let orgCounter = 0
/** A fresh organization (with a project) per test, so no test sees another's events. */
const freshOrg = async () => {
  const n = orgCounter++
  const org = await http.post("/v1/organizations", { token: owner.user_token, body: { name: `Hooks ${n}`, slug: `hooks-${n}-${Date.now()}` } })
  expect(org.status).toBe(201)
  const project = await http.post(`/v1/organizations/${org.body.id}/projects`, { token: owner.user_token, body: { name: "P", slug: "p" } })
  expect(project.status).toBe(201)
  const base = `/v1/organizations/${org.body.id}/webhooks`
  return {
    orgId: org.body.id as string,
    projectId: project.body.id as string,
    base,
    create: async (body: Record<string, unknown>) => {
      const created = await http.post(base, { token: owner.user_token, body: { name: "hook", ...body } })
      expect(created.status, created.text).toBe(201)
      return created.body
    },
    /** A project.updated event. */
    touch: async (i: number) => {
      const res = await http.patch(`/v1/projects/${project.body.id}`, { token: owner.user_token, body: { name: `P${i}`, slug: `p-${i}` } })
      expect(res.status).toBe(200)
    },
    deliveries: async (webhookId: string, query = "") => {
      const res = await http.get(`${base}/${webhookId}/deliveries${query}`, { token: owner.user_token })
      expect(res.status, res.text).toBe(200)
      return res.body as { deliveries: Array<any>; next_cursor: string | null }
    }
  }
}

const verify = (r: { headers: Record<string, string>; body: string }, secret: string) =>
  verifySignature({
    secret,
    deliveryId: r.headers["metal-delivery-id"]!,
    body: r.body,
    signature: r.headers["metal-signature"]!,
    timestamp: r.headers["metal-signature-timestamp"]!,
    nowSeconds: Math.floor(Date.now() / 1000)
  })

describe("delivery", () => {
  it("signs each delivery with the secret from create; after rotate only the new secret verifies; the body is the event as /v1/events shows it", async () => {
    const org = await freshOrg()
    // A host name (answered by the test DNS server): the delivery connects to the address checked, Host kept.
    dns.set("signed.hooks.test", ["127.0.0.1"])
    const hook = await org.create({ url: `http://signed.hooks.test:${receiver.port}/signed`, event_types: ["project.updated"] })
    await org.touch(1)
    await receiver.waitFor(() => receiver.at("/signed").length === 1)
    const first = receiver.at("/signed")[0]!
    expect(verify(first, hook.secret)).toBe(true)
    expect(first.headers["host"]).toBe(`signed.hooks.test:${receiver.port}`)
    expect(first.headers["content-type"]).toBe("application/json")
    expect(first.headers["metal-event-type"]).toBe("project.updated")
    expect(first.headers["metal-event-id"]).toBe(first.json.event_id)
    expect(first.headers["metal-signature"]).toBe(`t=${first.headers["metal-signature-timestamp"]},v1=${first.headers["metal-signature"]!.split("v1=")[1]}`)
    const events = (await http.get(`/v1/events?project_id=${org.projectId}`, { token: owner.user_token })).body.events
    expect(first.json).toEqual(events.find((e: any) => e.event_id === first.json.event_id))
    expect(Object.keys(first.json)).toEqual(["cursor", "event_id", "type", "organization_id", "project_id", "occurred_at", "data"])

    const rotated = (await http.post(`${org.base}/${hook.id}/rotate`, { token: owner.user_token })).body
    await org.touch(2)
    await receiver.waitFor(() => receiver.at("/signed").length === 2)
    const second = receiver.at("/signed")[1]!
    expect(verify(second, rotated.secret)).toBe(true)
    expect(verify(second, hook.secret)).toBe(false)
    expect(second.headers["metal-delivery-id"]).not.toBe(first.headers["metal-delivery-id"])
    const shown = await poll(() => http.get(`${org.base}/${hook.id}`, { token: owner.user_token }), (r) => r.body.last_delivery_status === "succeeded")
    expect(shown.body.last_delivery_at).not.toBeNull()
  })

  it("500, 500, then 200: one delivery, three attempts under one delivery id, success recorded", async () => {
    const org = await freshOrg()
    receiver.on("/flaky", (_req, nth) => new Response(nth <= 2 ? "down" : "fine", { status: nth <= 2 ? 500 : 200 }))
    const hook = await org.create({ url: receiver.url("/flaky"), event_types: ["project.updated"] })
    await org.touch(1)
    await receiver.waitFor(() => receiver.at("/flaky").length === 3)
    const ids = new Set(receiver.at("/flaky").map((r) => r.headers["metal-delivery-id"]))
    expect(ids.size).toBe(1)
    expect(new Set(receiver.at("/flaky").map((r) => r.body)).size).toBe(1) // the same bytes every time
    const { deliveries } = await poll(() => org.deliveries(hook.id), (d) => d.deliveries[0]?.status === "succeeded")
    expect(deliveries).toHaveLength(1)
    const d = deliveries[0]
    expect(d).toMatchObject({ id: [...ids][0], event_type: "project.updated", status: "succeeded", attempt_count: 3, last_http_status: 200, last_error: null, is_test: false, next_attempt_at: null })
    expect(d.delivered_at).not.toBeNull()
    expect(d.attempts.map((a: any) => [a.number, a.http_status, a.response_snippet])).toEqual([[1, 500, "down"], [2, 500, "down"], [3, 200, "fine"]])
    expect(d.attempts[0].error).toBe("the receiver answered 500")
    expect((await http.get(`${org.base}/${hook.id}`, { token: owner.user_token })).body).toMatchObject({ last_delivery_status: "succeeded" })
  })

  it("a 410 fails at once, and so does a redirect (never followed)", async () => {
    const org = await freshOrg()
    receiver.on("/gone", () => new Response("gone", { status: 410 }))
    receiver.on("/moved", () => new Response(null, { status: 302, headers: { location: receiver.url("/moved-here") } }))
    const gone = await org.create({ url: receiver.url("/gone"), event_types: ["project.updated"] })
    const moved = await org.create({ url: receiver.url("/moved"), event_types: ["project.updated"] })
    await org.touch(1)
    const [goneList, movedList] = await Promise.all([
      poll(() => org.deliveries(gone.id), (d) => d.deliveries[0]?.status === "failed"),
      poll(() => org.deliveries(moved.id), (d) => d.deliveries[0]?.status === "failed")
    ])
    expect(goneList.deliveries[0]).toMatchObject({ attempt_count: 1, last_http_status: 410, next_attempt_at: null, last_error: "the receiver answered 410" })
    expect(movedList.deliveries[0]).toMatchObject({ attempt_count: 1, last_http_status: 302 })
    expect(movedList.deliveries[0].last_error).toMatch(/redirects are not followed/)
    expect(receiver.at("/gone")).toHaveLength(1)
    expect(receiver.at("/moved-here")).toHaveLength(0)
    expect((await http.get(`${org.base}/${gone.id}`, { token: owner.user_token })).body.last_delivery_status).toBe("failed")
  })

  it("a receiver that never answers is retried with backoff until attempts run out, then its endpoint is disabled; re-enabling resumes new events", async () => {
    const org = await freshOrg()
    receiver.on("/hang", () => "hang")
    const silent = await org.create({ url: receiver.url("/hang"), event_types: ["project.updated"] })
    const watcher = await org.create({ url: receiver.url("/watcher"), event_types: ["webhook.endpoint_disabled"] })
    // One event first: its delivery runs out of attempts (8), each after a wait of at least the backoff's lower bound.
    await org.touch(1)
    const first = (await poll(() => org.deliveries(silent.id), (d) => d.deliveries[0]?.status === "failed", 30_000, 50)).deliveries[0]
    expect(first.attempts).toHaveLength(8)
    expect(first.attempt_count).toBe(8)
    for (const [i, a] of first.attempts.entries()) {
      expect(a.http_status).toBeNull()
      expect(a.error).toBe("no response within 400 ms")
      expect(a.latency_ms).toBeGreaterThanOrEqual(ATTEMPT_TIMEOUT_MS - 5)
      if (i === 0) continue
      const previous = first.attempts[i - 1]
      const waited = Date.parse(a.started_at) - (Date.parse(previous.started_at) + previous.latency_ms)
      const lowerBound = 0.5 * Math.min(RETRY_BASE_MS * 2 ** (i - 1), RETRY_MAX_MS)
      expect(waited, `wait before attempt ${i + 1}`).toBeGreaterThanOrEqual(lowerBound - 3)
    }
    expect((await http.get(`${org.base}/${silent.id}`, { token: owner.user_token })).body).toMatchObject({ enabled: true, last_delivery_status: "failed" })

    // Two more: the 20th failed attempt in a row (more than a second after the first) disables the endpoint.
    await org.touch(2)
    await org.touch(3)
    const disabled = await poll(() => http.get(`${org.base}/${silent.id}`, { token: owner.user_token }), (r) => r.body.enabled === false, 60_000, 50)
    expect(disabled.body.disabled_at).not.toBeNull()
    expect(disabled.body.disabled_reason).toMatch(/^Every delivery attempt since .* failed \(20 in a row; the last: no response within 400 ms\)/)

    // The organization's other endpoint was told.
    await receiver.waitFor(() => receiver.at("/watcher").length === 1)
    const notice = receiver.at("/watcher")[0]!
    expect(verify(notice, watcher.secret)).toBe(true)
    expect(notice.json).toMatchObject({
      type: "webhook.endpoint_disabled",
      organization_id: org.orgId,
      project_id: null,
      data: { webhook_id: silent.id, disabled_reason: disabled.body.disabled_reason, consecutive_failures: 20 }
    })

    // Every delivery ended failed; attempts that fell due after the endpoint was disabled were not made.
    const all = await poll(() => org.deliveries(silent.id), (d) => d.deliveries.length === 3 && d.deliveries.every((x: any) => x.status === "failed"))
    expect(all.deliveries.reduce((n: number, d: any) => n + d.attempts.length, 0)).toBe(20)
    expect(all.deliveries.filter((d: any) => d.last_error === "the webhook endpoint is disabled").length).toBeGreaterThanOrEqual(1)

    // While disabled, new events make no deliveries for it.
    await org.touch(4)
    await org.touch(5)
    const before = (await org.deliveries(silent.id)).deliveries.length
    expect(before).toBe(3)

    // Re-enabled (pointing at a receiver that answers): new events are delivered again.
    const enabled = await http.patch(`${org.base}/${silent.id}`, { token: owner.user_token, body: { enabled: true, url: receiver.url("/back") } })
    expect(enabled.body).toMatchObject({ enabled: true, disabled_at: null, disabled_reason: null })
    await org.touch(6)
    await receiver.waitFor(() => receiver.at("/back").length === 1)
    expect(receiver.at("/back")[0]!.json.data.name).toBe("P6")
  }, 90_000)
})

describe("delivery routes", () => {
  it("test sends webhook.test (even to a disabled endpoint); lists newest first with cursors; redelivers a finished delivery under its id; 409 while in flight", async () => {
    const org = await freshOrg()
    const hook = await org.create({ url: receiver.url("/routes"), enabled: false })
    const sent = await http.post(`${org.base}/${hook.id}/test`, { token: owner.user_token })
    expect(sent.status).toBe(200)
    expect(sent.body).toMatchObject({ endpoint_id: hook.id, event_type: "webhook.test", status: "pending", attempt_count: 0, is_test: true, attempts: [] })
    await receiver.waitFor(() => receiver.at("/routes").length === 1)
    const got = receiver.at("/routes")[0]!
    expect(verify(got, hook.secret)).toBe(true)
    expect(got.json).toMatchObject({ cursor: "test", type: "webhook.test", organization_id: org.orgId, project_id: null, event_id: sent.body.event_id })
    expect(got.headers["metal-delivery-id"]).toBe(sent.body.id)

    // Paging: three test deliveries, newest first, two per page.
    await http.post(`${org.base}/${hook.id}/test`, { token: owner.user_token })
    await http.post(`${org.base}/${hook.id}/test`, { token: owner.user_token })
    await receiver.waitFor(() => receiver.at("/routes").length === 3)
    const page1 = await poll(() => org.deliveries(hook.id, "?limit=2"), (p) => p.deliveries.every((d: any) => d.status === "succeeded"))
    expect(page1.deliveries).toHaveLength(2)
    expect(page1.next_cursor).not.toBeNull()
    const page2 = await org.deliveries(hook.id, `?limit=2&cursor=${page1.next_cursor}`)
    expect(page2.deliveries.map((d: any) => d.id)).toEqual([sent.body.id])
    expect(page2.next_cursor).toBeNull()
    const ordered = [...page1.deliveries, ...page2.deliveries].map((d: any) => d.created_at)
    expect(ordered).toEqual([...ordered].sort().reverse())
    expectEnvelope(await http.get(`${org.base}/${hook.id}/deliveries?cursor=bogus`, { token: owner.user_token }), 422, "validation_error")

    // Redelivery: same id and body, attempts counted afresh, the log kept.
    const again = await http.post(`${org.base}/${hook.id}/deliveries/${sent.body.id}/redeliver`, { token: owner.user_token })
    expect(again.status).toBe(200)
    expect(again.body).toMatchObject({ id: sent.body.id, status: "pending", attempt_count: 0 })
    expect(again.body.attempts).toHaveLength(1)
    await receiver.waitFor(() => receiver.at("/routes").length === 4)
    const redelivered = receiver.at("/routes")[3]!
    expect(redelivered.headers["metal-delivery-id"]).toBe(sent.body.id)
    expect(redelivered.body).toBe(got.body)
    const after = await poll(() => org.deliveries(hook.id), (p) => p.deliveries.find((d: any) => d.id === sent.body.id)?.status === "succeeded")
    expect(after.deliveries.find((d: any) => d.id === sent.body.id).attempts.map((a: any) => a.number)).toEqual([1, 2])

    // In flight: a test to a receiver that does not answer cannot be redelivered yet.
    receiver.on("/slow", () => "hang")
    const slow = await org.create({ url: receiver.url("/slow") })
    const pending = (await http.post(`${org.base}/${slow.id}/test`, { token: owner.user_token })).body
    const busy = expectEnvelope(await http.post(`${org.base}/${slow.id}/deliveries/${pending.id}/redeliver`, { token: owner.user_token }), 409, "delivery_in_flight")
    expect(["pending", "delivering", "retrying"]).toContain(busy.details?.status)
    // Another endpoint's delivery is not found through this one, nor an unknown id.
    expectEnvelope(await http.post(`${org.base}/${hook.id}/deliveries/${pending.id}/redeliver`, { token: owner.user_token }), 404, "not_found")
  })

  it("members read deliveries; only owners and admins send tests and redeliver; outsiders and deleted endpoints are refused", async () => {
    const org = await freshOrg()
    const hook = await org.create({ url: receiver.url("/roles"), event_types: ["project.deleted"] })
    const sent = (await http.post(`${org.base}/${hook.id}/test`, { token: owner.user_token })).body
    await receiver.waitFor(() => receiver.at("/roles").length === 1)
    const member = await joinAs(http, server.dataDir, owner.user_token, org.orgId, `member-${org.orgId.slice(0, 8)}@example.com`, "member")
    expect((await http.get(`${org.base}/${hook.id}/deliveries`, { token: member })).status).toBe(200)
    expectEnvelope(await http.post(`${org.base}/${hook.id}/test`, { token: member }), 403, "forbidden")
    expectEnvelope(await http.post(`${org.base}/${hook.id}/deliveries/${sent.id}/redeliver`, { token: member }), 403, "forbidden")
    expectEnvelope(await http.get(`${org.base}/${hook.id}/deliveries`, { token: outsider.user_token }), 403, "forbidden")
    expectEnvelope(await http.post(`${org.base}/${hook.id}/test`, { token: outsider.user_token }), 403, "forbidden")
    expectEnvelope(await http.get(`${org.base}/${hook.id}/deliveries`, { token: owner.api_key }), 401, "unauthenticated")
    const unknown = "00000000-0000-4000-8000-000000000000"
    expectEnvelope(await http.get(`${org.base}/${unknown}/deliveries`, { token: owner.user_token }), 404, "not_found")
    expectEnvelope(await http.post(`${org.base}/${hook.id}/deliveries/${unknown}/redeliver`, { token: owner.user_token }), 404, "not_found")
    expect((await http.delete(`${org.base}/${hook.id}`, { token: owner.user_token })).status).toBe(200)
    expectEnvelope(await http.get(`${org.base}/${hook.id}/deliveries`, { token: owner.user_token }), 404, "not_found")
    expectEnvelope(await http.post(`${org.base}/${hook.id}/test`, { token: owner.user_token }), 404, "not_found")
  })
})

describe("URL policy on a default server", () => {
  let strict: RunningServer
  let strictHttp: ReturnType<typeof api>
  let boot: Bootstrap
  beforeAll(async () => {
    strict = await startServer({ env: { WEBHOOK_RETRY_BASE_MS: "20", WEBHOOK_RETRY_MAX_MS: "100" } })
    strictHttp = api(strict.url)
    boot = await bootstrap(strict.dataDir, "strict@example.com")
  })
  afterAll(() => strict.stop())

  it("refuses loopback, private, link-local and metadata targets in every spelling at create and update (422 naming the rule)", async () => {
    const base = `/v1/organizations/${boot.organization_id}/webhooks`
    const refused: ReadonlyArray<readonly [string, RegExp]> = [
      [receiver.url("/x"), /loopback/],
      ["http://2130706433/x", /loopback/],
      ["http://0177.0.0.1/x", /loopback/],
      ["http://0x7f.1/x", /loopback/],
      ["http://[::1]/x", /loopback/],
      ["http://[::ffff:127.0.0.1]/x", /loopback.*IPv4-mapped/],
      ["http://localhost/x", /localhost/],
      ["http://10.0.0.8/x", /private/],
      ["http://[fd00::8]/x", /unique local/],
      ["http://169.254.169.254/latest/meta-data/", /metadata/],
      ["http://[fe80::1]/x", /link-local/],
      ["http://0.0.0.0/x", /unspecified/]
    ]
    for (const [url, rule] of refused) {
      const envelope = expectEnvelope(await strictHttp.post(base, { token: boot.user_token, body: { name: "x", url } }), 422, "validation_error")
      expect(envelope.details.issues, url).toEqual([{ path: "url", message: expect.stringMatching(rule) }])
    }
    expect((await strictHttp.get(base, { token: boot.user_token })).body.webhooks).toEqual([])
    // A name that resolves to a private address is refused the same way.
    dns.set("intranet.hooks.test", ["192.168.7.7"])
    const viaDns = expectEnvelope(await strictHttp.post(base, { token: boot.user_token, body: { name: "x", url: "https://intranet.hooks.test/x" } }), 422, "validation_error")
    expect(viaDns.details.issues[0].message).toMatch(/intranet\.hooks\.test resolves to 192\.168\.7\.7, a private address/)
    // Update: the same check.
    dns.set("public.hooks.test", ["93.184.215.14"])
    const ok = await strictHttp.post(base, { token: boot.user_token, body: { name: "x", url: "https://public.hooks.test/x", enabled: false } })
    expect(ok.status).toBe(201)
    expectEnvelope(await strictHttp.patch(`${base}/${ok.body.id}`, { token: boot.user_token, body: { url: "http://[::ffff:a9fe:a9fe]/" } }), 422, "validation_error")
    expect((await strictHttp.get(`${base}/${ok.body.id}`, { token: boot.user_token })).body.url).toBe("https://public.hooks.test/x")
  })

  it("DNS that answers a private address for a public name at delivery is refused before connecting", async () => {
    const base = `/v1/organizations/${boot.organization_id}/webhooks`
    // Public when the endpoint is created (disabled: nothing could be sent to that address) ...
    dns.set("rebind.hooks.test", ["93.184.215.14"])
    const hook = await strictHttp.post(base, {
      token: boot.user_token,
      body: { name: "rebind", url: `http://rebind.hooks.test:${receiver.port}/rebind`, event_types: ["project.updated"], enabled: false }
    })
    expect(hook.status).toBe(201)
    // ... loopback when the delivery is made (the test DNS answers with TTL 0, so no resolver keeps the first
    // answer): the attempt is refused, nothing reaches the receiver behind it.
    dns.set("rebind.hooks.test", ["127.0.0.1"])
    expect((await strictHttp.patch(`${base}/${hook.body.id}`, { token: boot.user_token, body: { enabled: true } })).status).toBe(200)
    const lookups = dns.queries("rebind.hooks.test")
    expect((await strictHttp.patch(`/v1/projects/${boot.project_id}`, { token: boot.user_token, body: { name: "R", slug: "r" } })).status).toBe(200)
    const { body } = await poll(() => strictHttp.get(`${base}/${hook.body.id}/deliveries`, { token: boot.user_token }), (r) => r.body.deliveries[0]?.status === "failed")
    const delivery = body.deliveries[0]
    expect(delivery.attempt_count, JSON.stringify(delivery)).toBe(1)
    expect(delivery.last_http_status).toBeNull()
    expect(delivery.last_error).toMatch(/^refused: rebind\.hooks\.test resolves to 127\.0\.0\.1, a loopback address/)
    expect(receiver.at("/rebind")).toHaveLength(0)
    // The name was looked up again for the attempt (not taken from the check at create).
    expect(dns.queries("rebind.hooks.test")).toBeGreaterThan(lookups)
  })
})
