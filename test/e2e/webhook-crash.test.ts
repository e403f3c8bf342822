/**
 * A crash loses no webhook: the server is SIGKILLed while 50 events wait to be delivered to a slow receiver,
 * then restarted on the same DATA_DIR. Every event reaches the receiver; an event received twice (answered, but
 * the server died before recording it) carries the same delivery id both times.
 */
import { afterAll, describe, expect, it } from "vitest"
import { poll } from "../support/sandbox.ts"
import { api, bootstrap, type RunningServer, startServer, tempDataDir } from "../support/server.ts"
import { startReceiver } from "../support/webhooks.ts"

const EVENTS = 50
const ENV = { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WEBHOOK_RETRY_BASE_MS: "20", WEBHOOK_RETRY_MAX_MS: "200" }
const receiver = startReceiver()
let server: RunningServer | undefined

afterAll(async () => {
  receiver.stop()
  await server?.stop()
})

describe("webhook delivery across a crash", () => {
  it("SIGKILL with 50 events pending, restart: every event arrives; duplicates carry the same delivery id", async () => {
    const dataDir = tempDataDir("webhook-crash")
    server = await startServer({ dataDir, env: ENV })
    let http = api(server.url)
    const boot = await bootstrap(dataDir, "crash-hooks@example.com")
    // Slow enough that most deliveries are still waiting when the server dies (one endpoint: one at a time).
    receiver.on("/slow", async () => {
      await Bun.sleep(100)
      return new Response("ok")
    })
    const hook = await http.post(`/v1/organizations/${boot.organization_id}/webhooks`, {
      token: boot.user_token,
      body: { name: "slow", url: receiver.url("/slow"), event_types: ["project.created"] }
    })
    expect(hook.status).toBe(201)
    const projects: Array<string> = []
    for (let i = 0; i < EVENTS; i++) {
      const created = await http.post(`/v1/organizations/${boot.organization_id}/projects`, { token: boot.user_token, body: { name: `Crash ${i}`, slug: `crash-${i}` } })
      expect(created.status).toBe(201)
      projects.push(created.body.id)
    }
    await receiver.waitFor((r) => r.length >= 5, 30_000, "the first deliveries")
    await server.stop({ kill: true })
    const beforeRestart = receiver.at("/slow").length
    expect(beforeRestart).toBeLessThan(EVENTS)

    server = await startServer({ dataDir, env: ENV })
    http = api(server.url)
    const eventIdsOf = () => new Set(receiver.at("/slow").map((r) => r.json.event_id))
    await receiver.waitFor(() => eventIdsOf().size === EVENTS, 60_000, "all 50 events after the restart")

    const received = receiver.at("/slow")
    expect(received.every((r) => r.json.type === "project.created")).toBe(true)
    expect(new Set(received.map((r) => r.json.data.project_id))).toEqual(new Set(projects))
    // An event delivered more than once went under one delivery id.
    const idsByEvent = new Map<string, Set<string>>()
    for (const r of received) idsByEvent.set(r.json.event_id, (idsByEvent.get(r.json.event_id) ?? new Set()).add(r.headers["metal-delivery-id"]!))
    expect([...idsByEvent.values()].every((ids) => ids.size === 1)).toBe(true)
    // The log agrees: 50 deliveries, all succeeded.
    const all: Array<any> = []
    let cursor: string | null = null
    do {
      const res: any = await http.get(`/v1/organizations/${boot.organization_id}/webhooks/${hook.body.id}/deliveries?limit=100${cursor ? `&cursor=${cursor}` : ""}`, { token: boot.user_token })
      all.push(...res.body.deliveries)
      cursor = res.body.next_cursor
    } while (cursor !== null)
    expect(all).toHaveLength(EVENTS)
    const settled = await poll(
      async () => (await http.get(`/v1/organizations/${boot.organization_id}/webhooks/${hook.body.id}/deliveries?limit=100`, { token: boot.user_token })).body.deliveries,
      (list: Array<any>) => list.every((d) => d.status === "succeeded")
    )
    expect(new Set(settled.map((d: any) => d.id))).toEqual(new Set([...idsByEvent.values()].map((ids) => [...ids][0])))
  }, 120_000)
})
