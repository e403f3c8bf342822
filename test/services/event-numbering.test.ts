/**
 * Numbers taken per parent — an operation's events, a process's events and a webhook delivery's attempts (1, 2,
 * …) — stay unique, gap-free and ordered when many writers append at once: two complete db layers on one
 * database (on PostgreSQL pools of 4 and 2 connections, as two replicas with DATABASE_POOL_SIZE > 1 would have; on
 * SQLite two connections to one file, as the gateway and the CLI have), each appending concurrently, inside
 * transactions and outside. Runs on both engines. `MAX(n) + 1` numbering (operations, attempts) and an unlocked
 * read of a process's counter (its output batches) failed this on PostgreSQL.
 */
import { SqlClient } from "@effect/sql"
import type { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Stream } from "effect"
import { AppConfig } from "../../src/Config.ts"
import { DatabaseLive } from "../../src/db/Database.ts"
import { inTransaction } from "../../src/db/Db.ts"
import { EVENTS_CHANNEL, SIGNALS_CHANNEL } from "../../src/db/PgDialect.ts"
import { EventsRepo } from "../../src/db/repos/Events.ts"
import { OperationsRepo } from "../../src/db/repos/Operations.ts"
import { WebhookDeliveriesRepo } from "../../src/db/repos/WebhookDeliveries.ts"
import { ProcessesRepo } from "../../src/db/repos/Processes.ts"
import { appendOperationEvent, setOperationState } from "../../src/services/sandboxes/Operations.ts"
import { appendProcessEvent, storeProcessEvents } from "../../src/services/sandboxes/Processes.ts"
import { databaseUrlFor, onPostgres } from "../support/postgres.ts"
import { tempDataDir } from "../support/server.ts"
import { OperationId, OrganizationId, ProcessId, ProjectId, SandboxId } from "../../src/domain/Ids.ts"

const ORG = OrganizationId.make("00000000-0000-4000-8000-000000000001")
const PROJECT = ProjectId.make("prj_1")
const SANDBOX = SandboxId.make("sbx_1")
const OPERATION = OperationId.make("op_1")
const PROCESS = ProcessId.make("proc_1")
const NOW = "2030-01-01T00:00:00.000Z"

const config = (dataDir: string, poolSize: number) =>
  Layer.succeed(AppConfig, {
    port: 0, host: "127.0.0.1", dataDir, databaseUrl: databaseUrlFor(dataDir), databasePoolSize: poolSize, publicUrl: "http://127.0.0.1",
    publicUrlSet: true, logLevel: "info", maxBodyBytes: 1 << 20, rawWriteMaxBytes: 1 << 30, endpoints: { port: 0, host: "127.0.0.1", publicOrigin: undefined, base: undefined }
  })

/** Two writers on one database, each with its own connections (built one after the other: SQLite migrates once). */
const twoWriters = (dataDir: string) =>
  Effect.gen(function*() {
    const a = yield* Layer.build(DatabaseLive.pipe(Layer.provide(config(dataDir, 4))))
    const b = yield* Layer.build(DatabaseLive.pipe(Layer.provide(config(dataDir, 2))))
    return [a, b] as const
  })

const fixtures = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`INSERT INTO organizations (id, name, slug, created_at, updated_at) VALUES (${ORG}, 'Org', 'org', ${NOW}, ${NOW})`
  yield* sql`INSERT INTO projects (id, organization_id, name, slug, created_at, updated_at) VALUES (${PROJECT}, ${ORG}, 'P', 'p', ${NOW}, ${NOW})`
  yield* OperationsRepo.insert({ id: OPERATION, projectId: PROJECT, organizationId: ORG, keyId: null, type: "sandbox_create", state: "queued", resourceId: SANDBOX, completed: false }, [])
  yield* sql`INSERT INTO webhooks (id, organization_id, name, url, event_types, enabled, secret_ciphertext, secret_prefix, created_at, updated_at)
    VALUES ('wh1', ${ORG}, 'hook', 'https://hooks.example.com/x', '[]', 1, 'x', 'whsec_x', ${NOW}, ${NOW})`
  yield* sql`INSERT INTO sandboxes (id, project_id, organization_id, state, requested, billing_mode, created_at, updated_at, metadata)
    VALUES (${SANDBOX}, ${PROJECT}, ${ORG}, 'ready', '{}', 'managed', ${NOW}, ${NOW}, '{}')`
  yield* sql`INSERT INTO processes (id, project_id, sandbox_id, state, command, environment, timeout_seconds, max_output_bytes, created_at)
    VALUES (${PROCESS}, ${PROJECT}, ${SANDBOX}, 'running', '["sh"]', '{}', 60, 1000000, ${NOW})`
  expect(yield* WebhookDeliveriesRepo.insert({ id: "dlv1", endpointId: "wh1", organizationId: ORG, eventId: "evt1", eventType: "sandbox.ready", isTest: false, body: "{}", now: NOW }))
    .toBe(true)
})

const N = 60

describe("numbering per parent under concurrent writers", () => {
  it.live("an operation's events and a delivery's attempts are 1..n, each once, in the order they were taken", () =>
    Effect.scoped(Effect.gen(function*() {
      const [a, b] = yield* twoWriters(tempDataDir("numbering"))
      yield* Effect.provide(fixtures, a)
      const writerOf = (i: number) => (i % 2 === 0 ? a : b)
      // Half of the appends in a transaction of their own (as the services do), half alone.
      yield* Effect.all(Array.from({ length: N }, (_, i) => {
        const append = appendOperationEvent(OPERATION, "state_changed", { i })
        return Effect.provide(i % 4 < 2 ? inTransaction(append) : append, writerOf(i))
      }), { concurrency: "unbounded" })
      yield* Effect.all(Array.from({ length: N }, (_, i) =>
        Effect.provide(inTransaction(WebhookDeliveriesRepo.recordAttempt({
          deliveryId: "dlv1", startedAt: NOW, httpStatus: 500, error: `attempt ${i}`, latencyMs: i, snippet: null, status: "retrying", nextAttemptAt: NOW, now: NOW
        })), writerOf(i))), { concurrency: "unbounded" })

      const sql = Context.get(a, SqlClient.SqlClient)
      const numbers = Array.from({ length: N }, (_, i) => i + 1)
      const events = yield* Effect.provide(OperationsRepo.eventsAfter(OPERATION, 0), a)
      expect(events.map((e) => e.seq)).toEqual(numbers)
      expect(new Set(events.map((e) => e.data["i"])).size).toBe(N)
      const attempts = yield* Effect.provide(WebhookDeliveriesRepo.attemptsOf(["dlv1"]), a)
      expect(attempts.map((x) => x.number)).toEqual(numbers)
      expect(new Set(attempts.map((x) => x.error)).size).toBe(N)
      expect(yield* sql<{ n: number }>`SELECT last_attempt_number AS n FROM webhook_deliveries WHERE id = 'dlv1'`).toEqual([{ n: N }])
      // The next number follows on, also from an operation counter SQLite never kept (a database `db copy` brought over).
      yield* Effect.provide(OperationsRepo.appendEvent(OPERATION, "state_changed", {}), b)
      yield* sql`UPDATE operations SET last_event_seq = 0 WHERE id = ${OPERATION}`
      yield* Effect.provide(OperationsRepo.appendEvent(OPERATION, "completed", {}), a)
      expect((yield* Effect.provide(OperationsRepo.eventsAfter(OPERATION, N), a)).map((e) => [e.seq, e.type])).toEqual([[N + 1, "state_changed"], [N + 2, "completed"]])
    })), 60_000)

  it.live("a process's output batches and single events (a cancel request) written at once are numbered 1..n, each once", () =>
    Effect.scoped(Effect.gen(function*() {
      const [a, b] = yield* twoWriters(tempDataDir("numbering-process"))
      yield* Effect.provide(fixtures, a)
      // Output as the process job stores it (the counter read, then a batch of numbered rows), and single events
      // as the API appends them, from both writers at once. Every batch carries the same provider events: the
      // first stores them, the others find them stored.
      const output = Array.from({ length: 10 }, (_, seq) => ({ seq, type: "stdout" as const, data: new TextEncoder().encode(`line ${seq}\n`) }))
      yield* Effect.all(Array.from({ length: 2 * N }, (_, i) =>
        Effect.provide(
          i % 2 === 0 ? inTransaction(appendProcessEvent(PROCESS, "cancel_requested", { i })) : inTransaction(Effect.asVoid(storeProcessEvents(PROCESS, output, false))),
          i % 4 < 2 ? a : b
        )), { concurrency: "unbounded" })
      const events = yield* Effect.provide(ProcessesRepo.eventsAfter(PROCESS, 0, 1000), a)
      expect(events.map((e) => e.seq)).toEqual(Array.from({ length: N + 10 }, (_, i) => i + 1))
      expect(events.filter((e) => e.type === "stdout")).toHaveLength(10)
    })), 60_000)

  // A reader of the log (the event feed, `GET /v1/events`) remembers the last seq it gave out and asks for later ones:
  // a smaller seq committed after a larger one would never reach it. On PostgreSQL the append's lock (the dialect's
  // `eventLogLocked`) makes the later append wait for the earlier transaction. (SQLite writes one transaction at a
  // time: a second writer in this process would only wait out its busy timeout on the one thread.)
  it.live.skipIf(!onPostgres())("the event log's order is its commit order: a later append commits after an earlier one still open", () =>
    Effect.scoped(Effect.gen(function*() {
      const [a, b] = yield* twoWriters(tempDataDir("numbering-log"))
      yield* Effect.provide(fixtures, a)
      const append = (name: string) => Effect.map(EventsRepo.append({ type: "sandbox.ready", organizationId: ORG, projectId: PROJECT, data: { name } }), ({ event }) => event)
      const committed: Array<string> = []
      const first = yield* Effect.provide(
        inTransaction(Effect.gen(function*() {
          const row = yield* append("first")
          yield* Effect.sleep("300 millis")
          return row
        })).pipe(Effect.tap(() => Effect.sync(() => committed.push("first")))),
        a
      ).pipe(Effect.fork)
      yield* Effect.sleep("100 millis")
      const second = yield* Effect.provide(inTransaction(append("second")), b).pipe(Effect.tap(() => Effect.sync(() => committed.push("second"))))
      const earlier = yield* first.await.pipe(Effect.flatten)
      expect(earlier.seq).toBeLessThan(second.seq)
      expect(committed).toEqual(["first", "second"])
    })), 30_000)

  // The other replicas learn of an append from its NOTIFY (Db.announce), sent in the append's own statement.
  it.live.skipIf(!onPostgres())("on PostgreSQL each append is announced once, when its transaction commits", () =>
    Effect.scoped(Effect.gen(function*() {
      const [a] = yield* twoWriters(tempDataDir("numbering-announce"))
      yield* Effect.provide(fixtures, a)
      const sql = Context.get(a, SqlClient.SqlClient) as PgClient.PgClient
      const heard: Array<string> = []
      for (const channel of [SIGNALS_CHANNEL, EVENTS_CHANNEL]) {
        yield* sql.listen(channel).pipe(Stream.runForEach((payload) => Effect.sync(() => heard.push(`${channel} ${payload}`))), Effect.forkScoped)
      }
      // Listening once a probe of each channel is heard.
      yield* Effect.gen(function*() {
        yield* sql`SELECT pg_notify(${SIGNALS_CHANNEL}, 'probe'), pg_notify(${EVENTS_CHANNEL}, 'probe')`
        yield* Effect.sleep("20 millis")
        if (heard.length < 2) return yield* Effect.fail("not yet")
      }).pipe(Effect.retry({ times: 250 }), Effect.orDie)
      heard.length = 0
      const quiet = Effect.sleep("150 millis")
      const seq = yield* Effect.provide(inTransaction(Effect.gen(function*() {
        yield* appendOperationEvent(OPERATION, "state_changed", {})
        yield* appendProcessEvent(PROCESS, "cancel_requested", {})
        const { event } = yield* EventsRepo.append({ type: "sandbox.ready", organizationId: ORG, projectId: PROJECT, data: {} })
        // Nothing is told before the commit.
        yield* quiet
        expect(heard).toEqual([])
        return event.seq
      })), a)
      yield* quiet
      expect(heard).toEqual([`${SIGNALS_CHANNEL} operation:${OPERATION}`, `${SIGNALS_CHANNEL} process:${PROCESS}`, `${EVENTS_CHANNEL} ${seq}`])
      // Outside a transaction too, and a state change with its event: once; none when the state does not move.
      yield* Effect.provide(appendOperationEvent(OPERATION, "state_changed", {}), a)
      yield* Effect.provide(setOperationState(OPERATION, "running"), a)
      yield* Effect.provide(setOperationState(OPERATION, "running"), a)
      yield* quiet
      expect(heard.slice(3)).toEqual([`${SIGNALS_CHANNEL} operation:${OPERATION}`, `${SIGNALS_CHANNEL} operation:${OPERATION}`])
    })), 60_000)

  it.live("a state change appends its one event, numbered after the others, and nothing when the state does not move", () =>
    Effect.scoped(Effect.gen(function*() {
      const [a, b] = yield* twoWriters(tempDataDir("numbering-states"))
      yield* Effect.provide(fixtures, a)
      yield* Effect.provide(appendOperationEvent(OPERATION, "queued", { state: "queued" }), a)
      // Concurrent moves to the same state from both writers: one moves it, the other finds it there.
      const moved = yield* Effect.all([a, b, a, b].map((w) => Effect.provide(inTransaction(setOperationState(OPERATION, "running")), w)), { concurrency: "unbounded" })
      expect(moved.filter((m) => m)).toHaveLength(1)
      expect(yield* Effect.provide(setOperationState(OPERATION, "failed", { code: "x", message: "y", retryable: false }), b)).toBe(true)
      // Out of a terminal state, nothing moves.
      expect(yield* Effect.provide(setOperationState(OPERATION, "succeeded"), a)).toBe(false)
      const events = yield* Effect.provide(OperationsRepo.eventsAfter(OPERATION, 0), a)
      expect(events.map((e) => [e.seq, e.type, e.data["state"]])).toEqual([[1, "queued", "queued"], [2, "state_changed", "running"], [3, "completed", "failed"]])
      const row = yield* Effect.provide(OperationsRepo.get(OPERATION), a)
      expect([row?.state, row?.error?.code, row?.completed_at !== null]).toEqual(["failed", "x", true])
    })), 60_000)

  it.live("an event for an operation that does not exist is refused, not numbered", () =>
    Effect.scoped(Effect.gen(function*() {
      const [a] = yield* twoWriters(tempDataDir("numbering-missing"))
      const exit = yield* Effect.exit(Effect.provide(OperationsRepo.appendEvent(OperationId.make("op_missing"), "queued", {}), a))
      expect(exit._tag).toBe("Failure")
      const sql = Context.get(a, SqlClient.SqlClient)
      expect(yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM operation_events`).toEqual([{ n: 0 }])
    })), 60_000)
})
