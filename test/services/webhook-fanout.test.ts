/**
 * Fan-out on a real SQLite file: `appendEvent` writes one delivery (with its job) per enabled, undeleted endpoint
 * of the event's organization whose filter matches, in the event's own transaction: rolled back with it, never
 * twice for one (endpoint, event).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer } from "effect"
import { AppConfig } from "../../src/Config.ts"
import { DatabaseLive } from "../../src/db/Database.ts"
import { inTransaction } from "../../src/db/Db.ts"
import { WebhookDeliveriesRepo } from "../../src/db/repos/WebhookDeliveries.ts"
import { type WebhookRow, WebhooksRepo } from "../../src/db/repos/Webhooks.ts"
import { appendEvent } from "../../src/services/Events.ts"
import { databaseUrlFor } from "../support/postgres.ts"
import { tempDataDir } from "../support/server.ts"
import { OrganizationId, ProjectId } from "../../src/domain/Ids.ts"

const layer = (dataDir = tempDataDir("fanout")) =>
  DatabaseLive.pipe(Layer.provideMerge(Layer.succeed(AppConfig, {
    port: 0, host: "127.0.0.1", dataDir, databaseUrl: databaseUrlFor(dataDir), publicUrl: "http://x", publicUrlSet: true, logLevel: "info", maxBodyBytes: 1, rawWriteMaxBytes: 1 << 30,
    endpoints: { port: 0, host: "127.0.0.1", publicOrigin: undefined, base: undefined }
  })))

const ORG1 = OrganizationId.make("00000000-0000-4000-8000-000000000001")
const ORG2 = OrganizationId.make("00000000-0000-4000-8000-000000000002")
const PROJECT_X = ProjectId.make("prj_x")
const PROJECT_Y = ProjectId.make("prj_y")
const NOW = "2030-01-01T00:00:00.000Z"

const endpoint = (id: string, organizationId: OrganizationId, overrides: Partial<WebhookRow> = {}): WebhookRow => ({
  id, organization_id: organizationId, name: id, url: "https://hooks.example.com/x", event_types: [], enabled: true, secret_ciphertext: "sealed",
  secret_prefix: "whsec_", rotated_at: null, last_delivery_at: null, last_delivery_status: null, created_at: NOW, updated_at: NOW,
  disabled_at: null, deleted_at: null, disabled_reason: null, consecutive_failures: 0, failing_since: null, ...overrides
})

const rows = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const deliveries = yield* sql<{ endpoint_id: string; event_type: string; status: string; body: string }>`SELECT endpoint_id, event_type, status, body FROM webhook_deliveries ORDER BY endpoint_id`
  const jobs = yield* sql<{ dedupe_key: string; lock_key: string; type: string }>`SELECT dedupe_key, lock_key, type FROM jobs ORDER BY dedupe_key`
  return { deliveries, jobs }
})

describe("fan-out", () => {
  it.live("one delivery and one job per matching endpoint; filters, disabled, deleted and other organizations respected", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      for (const org of [ORG1, ORG2]) yield* sql`INSERT INTO organizations (id, name, slug, created_at, updated_at) VALUES (${org}, ${org}, ${org}, ${NOW}, ${NOW})`
      yield* WebhooksRepo.insert(endpoint("a-all", ORG1))
      yield* WebhooksRepo.insert(endpoint("b-ready", ORG1, { event_types: ["sandbox.ready"] }))
      yield* WebhooksRepo.insert(endpoint("c-other-type", ORG1, { event_types: ["sandbox.failed"] }))
      yield* WebhooksRepo.insert(endpoint("d-disabled", ORG1, { enabled: false, disabled_at: NOW }))
      yield* WebhooksRepo.insert(endpoint("e-deleted", ORG1, { deleted_at: NOW }))
      yield* WebhooksRepo.insert(endpoint("f-other-org", ORG2))
      const event = yield* appendEvent({ type: "sandbox.ready", organizationId: ORG1, projectId: PROJECT_X, data: { sandbox_id: "sbx_1" } })
      const { deliveries, jobs } = yield* rows
      expect(deliveries.map((d) => [d.endpoint_id, d.event_type, d.status])).toEqual([["a-all", "sandbox.ready", "pending"], ["b-ready", "sandbox.ready", "pending"]])
      expect(JSON.parse(deliveries[0]!.body)).toMatchObject({ event_id: event.id, type: "sandbox.ready", organization_id: ORG1, project_id: PROJECT_X, data: { sandbox_id: "sbx_1" } })
      expect(jobs).toEqual([
        { dedupe_key: `webhook:a-all:${event.id}`, lock_key: "webhook:a-all", type: "webhook.deliver" },
        { dedupe_key: `webhook:b-ready:${event.id}`, lock_key: "webhook:b-ready", type: "webhook.deliver" }
      ])
      // Unique on (endpoint, event): a second insert for the same pair is refused.
      const again = yield* WebhookDeliveriesRepo.insert({ id: crypto.randomUUID(), endpointId: "a-all", organizationId: ORG1, eventId: event.id, eventType: "sandbox.ready", isTest: false, body: "{}", now: NOW })
      expect(again).toBe(false)
      expect((yield* rows).deliveries).toHaveLength(2)
    }).pipe(Effect.provide(layer())))

  it.live("rolled back with the transaction of the change it records: no event, no delivery, no job", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO organizations (id, name, slug, created_at, updated_at) VALUES (${ORG1}, 'o', 'o', ${NOW}, ${NOW})`
      yield* WebhooksRepo.insert(endpoint("a-all", ORG1))
      const exit = yield* Effect.exit(inTransaction(Effect.gen(function*() {
        yield* appendEvent({ type: "project.created", organizationId: ORG1, projectId: PROJECT_Y, data: {} })
        return yield* Effect.fail("the change failed")
      })))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(yield* rows).toEqual({ deliveries: [], jobs: [] })
      expect((yield* sql<{ n: number }>`SELECT count(*) AS n FROM domain_events`)[0]?.n).toBe(0)
    }).pipe(Effect.provide(layer())))
})
