/**
 * FastReads (src/http/FastReads.ts) answers the polled GETs straight from the database (SQLite, or PostgreSQL on
 * the PostgreSQL run). It must answer exactly what the full stack answers, and only the plain success: every other
 * request is handed to the full stack. Checked two ways against a real server and its database: over HTTP (bodies equal those of the full stack, reached with a
 * query string, which FastReads never answers; errors stay in the envelope), and by calling the routes in this
 * process with a server whose `fetch` records the hand-over.
 */
import { Effect, Exit, Logger, LogLevel, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FastReads, makeFastReads } from "../../src/http/FastReads.ts"
import type { LiveStreamsShape } from "../../src/services/LiveStreams.ts"
import { openPolledReads } from "../../src/services/PolledReads.ts"
import { appendOperationEvent, execSql, insertRunningOperation, querySql } from "../support/accounts.ts"
import { databaseUrlFor } from "../support/postgres.ts"
import { api, bootstrap, type Bootstrap, expectEnvelope, type RunningServer, startServer } from "../support/server.ts"
import { createReadySandbox, type KeyAuth, runProcess, waitOperation, waitRuntimeOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let owner: Bootstrap
let auth: KeyAuth
let other: KeyAuth
let sandboxId: string
let processId: string
let operationId: string
let readId: string
let fast: FastReads
const scope = Effect.runSync(Scope.make())

/** The streams the FastReads of this process held open (LiveStreams, recorded: the server's own ends them on revocation, test/http/stream-revocation.test.ts). */
const held = { opened: 0, closed: 0 }
const recordedStreams: LiveStreamsShape = {
  open: () => {
    held.opened++
    let closed = false
    return { signal: new AbortController().signal, endReason: () => undefined, close: () => closed || (closed = true, held.closed++) }
  }
}
/** A followed stream's heartbeat in this process's FastReads. */
const HEARTBEAT_MS = 50

/** A bytes column as read by querySql: a Uint8Array from SQLite, `\x…` hex text from PostgreSQL (as JSON). */
const bytesOf = (value: Uint8Array | string): Buffer => (typeof value === "string" ? Buffer.from(value.replace(/^\\x/, ""), "hex") : Buffer.from(value))

const HANDED_OVER = 599

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  owner = await bootstrap(server.dataDir, "fast@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
  const stranger = await bootstrap(server.dataDir, "stranger@example.com")
  other = { token: stranger.api_key, project: stranger.project_id }
  const created = await http.post("/v1/sandboxes", {
    ...auth,
    body: { source: { kind: "environment", environment: "metal/base" }, resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 600 } },
    headers: { "idempotency-key": "fast-reads-create" }
  })
  operationId = created.body.operation.id
  sandboxId = (await createReadySandbox(http, auth)).id
  processId = (await runProcess(http, auth, sandboxId, ["sh", "-c", "echo out; echo err >&2; exit 4"])).process.id
  const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => i % 256))
  const write = await http.post(`/v1/sandboxes/${sandboxId}/filesystem/write`, { ...auth, body: { path: "/workspace/f.bin", data_base64: bytes.toString("base64") }, headers: { "idempotency-key": "fast-reads-write" } })
  await waitRuntimeOperation(http, auth, sandboxId, write.body.id)
  readId = (await http.post(`/v1/sandboxes/${sandboxId}/filesystem/read`, { ...auth, body: { path: "/workspace/f.bin" } })).body.id
  const read = await waitRuntimeOperation(http, auth, sandboxId, readId)
  expect(Buffer.from(read.result.data_base64, "base64").equals(bytes)).toBe(true)
  // Stored apart: the row's result without the data, the bytes raw in runtime_operation_data.
  const stored = querySql<{ result: string; data: Uint8Array | string }>(server.dataDir,
    "SELECT r.result, d.data FROM runtime_operations r JOIN runtime_operation_data d ON d.runtime_operation_id = r.id WHERE r.id = ?", readId)[0]!
  expect(JSON.parse(stored.result)).toEqual({ kind: "filesystem_read", path: "/workspace/f.bin", offset_bytes: 0, byte_length: 4096, size_bytes: 4096, eof: true })
  expect(bytesOf(stored.data).equals(bytes)).toBe(true)
  // The same FastReads the server runs, in this process, on the server's database (with a short heartbeat).
  fast = await Effect.runPromise(Effect.gen(function*() {
    const queries = yield* openPolledReads({ dataDir: server.dataDir, databaseUrl: databaseUrlFor(server.dataDir) })
    return makeFastReads({ queries, streams: recordedStreams, runtime: yield* Effect.runtime<never>(), heartbeatMs: HEARTBEAT_MS })
  }).pipe(Scope.extend(scope), Logger.withMinimumLogLevel(LogLevel.None)))
}, 60_000)

afterAll(async () => {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await server?.stop()
})

const paths = () => ({
  sandbox: `/v1/sandboxes/${sandboxId}`,
  process: `/v1/sandboxes/${sandboxId}/processes/${processId}`,
  read: `/v1/sandboxes/${sandboxId}/runtime-operations/${readId}`,
  operation: `/v1/operations/${operationId}`
})

/** Calls a FastReads route in this process; a hand-over to the full stack answers HANDED_OVER. */
const direct = async (pattern: string, url: string, init: RequestInit & { params: Record<string, string> }) => {
  const request = Object.assign(new Request(`http://gateway${url}`, init), { params: init.params, cookies: new Map() })
  const handedOver = { fetch: () => new Response(null, { status: HANDED_OVER }) }
  const response = await fast.routes[pattern]!(request as never, handedOver as never)
  return { status: response.status, body: response.status === 200 ? await response.json() : undefined, headers: response.headers }
}
const OPERATION_EVENTS = "/v1/operations/:operation_id/events"
const PROCESS_EVENTS = "/v1/sandboxes/:sandbox_id/processes/:process_id/events"
/** Calls a followed-events route in this process (an operation's unless `pattern` says): its response as is (a hand-over answers HANDED_OVER). */
const directFollow = async (url: string, init: RequestInit & { params: Record<string, string> }, pattern = OPERATION_EVENTS) => {
  const request = Object.assign(new Request(`http://gateway${url}`, init), { params: init.params, cookies: new Map() })
  const handedOver = { fetch: () => new Response(null, { status: HANDED_OVER }) }
  return fast.routes[pattern]!(request as never, handedOver as never)
}
const headers = (a: KeyAuth, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${a.token}`, "x-metal-project-id": a.project, ...extra })
const routes = () => [
  { pattern: "/v1/sandboxes/:sandbox_id", url: paths().sandbox, params: { sandbox_id: sandboxId } },
  { pattern: "/v1/sandboxes/:sandbox_id/processes/:process_id", url: paths().process, params: { sandbox_id: sandboxId, process_id: processId } },
  { pattern: "/v1/sandboxes/:sandbox_id/runtime-operations/:runtime_operation_id", url: paths().read, params: { sandbox_id: sandboxId, runtime_operation_id: readId } },
  { pattern: "/v1/operations/:operation_id", url: paths().operation, params: { operation_id: operationId } }
]

describe("fast reads", () => {
  it("answer each polled read with exactly the full stack's body, content type and request id", async () => {
    for (const path of Object.values(paths())) {
      const full = await http.get(`${path}?full=1`, auth)
      const quick = await http.get(path, { ...auth, headers: { "x-request-id": "poll-1" } })
      expect(full.status).toBe(200)
      expect(quick.status).toBe(200)
      expect(quick.body).toEqual(full.body)
      expect(quick.headers.get("content-type")).toBe(full.headers.get("content-type"))
      expect(quick.headers.get("x-request-id")).toBe("poll-1")
    }
    // And they are really served by FastReads (the key was just used, so nothing is left to refresh).
    for (const route of routes()) {
      const answered = await direct(route.pattern, route.url, { headers: headers(auth), params: route.params })
      expect(answered.status).toBe(200)
      expect(answered.body).toEqual((await http.get(`${route.url}?full=1`, auth)).body)
    }
  })

  it("hand everything but the plain success to the full stack", async () => {
    const key = (await http.post(`/v1/projects/${owner.project_id}/api-keys`, { token: owner.user_token, body: { name: "second" } })).body
    const second: KeyAuth = { token: key.key, project: owner.project_id }
    expect((await http.get(paths().sandbox, second)).status).toBe(200) // sets its last_used_at
    for (const route of routes()) {
      const cases: Array<[string, RequestInit & { params: Record<string, string> }]> = [
        ["no credentials", { params: route.params }],
        ["a user token", { headers: { authorization: `Bearer ${owner.user_token}`, "x-metal-project-id": owner.project_id }, params: route.params }],
        ["an unknown key", { headers: headers({ token: `metal_sk_${"x".repeat(40)}`, project: owner.project_id }), params: route.params }],
        ["no project header", { headers: { authorization: `Bearer ${auth.token}` }, params: route.params }],
        ["another project's header", { headers: headers({ ...auth, project: other.project }), params: route.params }],
        ["another project's key", { headers: headers(other), params: route.params }],
        ["a malformed request id", { headers: headers(auth, { "x-request-id": "bad id!" }), params: route.params }],
        ["a DELETE", { method: "DELETE", headers: headers(auth), params: route.params }],
        ["an unknown id", { headers: headers(auth), params: Object.fromEntries(Object.keys(route.params).map((k) => [k, "x_nope"])) }]
      ]
      for (const [name, init] of cases) {
        expect({ name, route: route.pattern, status: (await direct(route.pattern, route.url, init)).status }).toEqual({ name, route: route.pattern, status: HANDED_OVER })
      }
      const query = await direct(route.pattern, `${route.url}?x=1`, { headers: headers(auth), params: route.params })
      expect(query.status).toBe(HANDED_OVER)
    }
    // A process or runtime operation read under another sandbox's path is not that process or operation.
    const wrongSandboxRead = await direct("/v1/sandboxes/:sandbox_id/runtime-operations/:runtime_operation_id", paths().read, {
      headers: headers(auth), params: { sandbox_id: "sbx_other", runtime_operation_id: readId }
    })
    expect(wrongSandboxRead.status).toBe(HANDED_OVER)
    const wrongSandbox = await direct("/v1/sandboxes/:sandbox_id/processes/:process_id", paths().process, {
      headers: headers(auth), params: { sandbox_id: "sbx_other", process_id: processId }
    })
    expect(wrongSandbox.status).toBe(HANDED_OVER)
    // An operation is read with the key that caused it (another key of the same project gets the full stack's 404).
    expect((await direct("/v1/operations/:operation_id", paths().operation, { headers: headers(second), params: { operation_id: operationId } })).status).toBe(HANDED_OVER)
    expectEnvelope(await http.get(paths().operation, second), 404, "not_found")
    // A key due for its last_used_at refresh goes through the full stack, which records the use.
    execSql(server.dataDir, "UPDATE api_keys SET last_used_at = '2020-01-01T00:00:00.000Z' WHERE id = ?", key.api_key?.id ?? key.id)
    expect((await direct("/v1/sandboxes/:sandbox_id", paths().sandbox, { headers: headers(second), params: { sandbox_id: sandboxId } })).status).toBe(HANDED_OVER)
    // Revoked and expired keys are never answered here.
    execSql(server.dataDir, "UPDATE api_keys SET last_used_at = ?, expires_at = '2020-01-01T00:00:00.000Z' WHERE id = ?", new Date().toISOString(), key.api_key?.id ?? key.id)
    expect((await direct("/v1/sandboxes/:sandbox_id", paths().sandbox, { headers: headers(second), params: { sandbox_id: sandboxId } })).status).toBe(HANDED_OVER)
    expectEnvelope(await http.get(paths().sandbox, second), 401, "unauthenticated")
  })

  it("leave every error of these routes to the full stack's envelope", async () => {
    for (const path of Object.values(paths())) {
      expectEnvelope(await http.get(path, {}), 401)
      expectEnvelope(await http.get(path, { token: auth.token }), 400, "project_header_required")
      expectEnvelope(await http.get(path, other), 404, "not_found")
    }
    expectEnvelope(await http.get("/v1/sandboxes/sbx_nope", auth), 404, "not_found")
    expectEnvelope(await http.get(`/v1/sandboxes/${sandboxId}/processes/proc_nope`, auth), 404, "not_found")
    expectEnvelope(await http.get("/v1/operations/op_nope", auth), 404, "not_found")
    expectEnvelope(await http.get(`/v1/sandboxes/${sandboxId}/runtime-operations/rop_nope`, auth), 404, "not_found")
  })

  it("a row that does not decode is handed to the full stack, which answers 500 internal_error without internals", async () => {
    const corruptions: Array<{ table: string; column: string; id: string; value: string; route: ReturnType<typeof routes>[number] }> = [
      { table: "operations", column: "error", id: operationId, value: '{"code":', route: routes()[3]! },
      { table: "processes", column: "state", id: processId, value: "sleeping", route: routes()[1]! },
      { table: "runtime_operations", column: "result", id: readId, value: '{"kind": "filesystem_read"}', route: routes()[2]! }
    ]
    for (const c of corruptions) {
      const original = querySql<Record<string, string>>(server.dataDir, `SELECT ${c.column} AS v FROM ${c.table} WHERE id = ?`, c.id)[0]!["v"]!
      execSql(server.dataDir, `UPDATE ${c.table} SET ${c.column} = ? WHERE id = ?`, c.value, c.id)
      try {
        expect((await direct(c.route.pattern, c.route.url, { headers: headers(auth), params: c.route.params })).status).toBe(HANDED_OVER)
        const answer = expectEnvelope(await http.get(c.route.url, auth), 500, "internal_error")
        expect(answer.message).toBe("Internal server error")
        expect(answer.details).toBeUndefined()
      } finally {
        execSql(server.dataDir, `UPDATE ${c.table} SET ${c.column} = ? WHERE id = ?`, original, c.id)
      }
      expect((await http.get(c.route.url, auth)).status).toBe(200)
    }
  })
})

/** A new operation id, of the form the gateway gives. */
const newOperationId = () => `op_${crypto.randomUUID().replaceAll("-", "")}`

/** Reads a response body chunk by chunk: `next` waits for the next chunk's text (null at the end). */
const chunks = (response: Response) => {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  return {
    next: async (): Promise<string | null> => {
      const { value, done } = await reader.read()
      return done ? null : decoder.decode(value)
    },
    cancel: () => reader.cancel()
  }
}

/** Everything a stream sends until it ends. */
const readAll = async (response: Response) => {
  const body = chunks(response)
  let text = ""
  for (let chunk = await body.next(); chunk !== null; chunk = await body.next()) text += chunk
  return text
}

const followPath = (id: string) => `/v1/operations/${id}/events`

/**
 * A follow of `path` (over already) from each Last-Event-ID: over HTTP, the same status, bytes and headers as the
 * full stack's (reached with an extra query parameter, which FastReads never takes); and really answered by
 * FastReads (called in this process), one stream held and let go.
 */
const expectFollowParity = async (path: string, pattern: string, params: Record<string, string>, lastEventIds: ReadonlyArray<string | undefined>) => {
  for (const lastEventId of lastEventIds) {
    const extra: Record<string, string> = { "x-request-id": "follow-1", ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }) }
    const full = await http.get(`${path}?follow=true&full=1`, { ...auth, headers: extra })
    const quick = await http.get(`${path}?follow=true`, { ...auth, headers: extra })
    expect(full.status).toBe(200)
    expect({ lastEventId, status: quick.status, text: quick.text }).toEqual({ lastEventId, status: 200, text: full.text })
    for (const header of ["content-type", "cache-control", "x-accel-buffering", "x-request-id"]) expect(quick.headers.get(header)).toBe(full.headers.get(header))
    const before = { ...held }
    const answered = await directFollow(`${path}?follow=true`, { headers: headers(auth, extra), params }, pattern)
    expect(answered.status).toBe(200)
    expect(await readAll(answered)).toBe(full.text)
    expect(held).toEqual({ opened: before.opened + 1, closed: before.closed + 1 })
  }
}

/** A running operation (with its first event stored), followed through FastReads in this process. */
const followRunningOperation = async () => {
  const id = newOperationId()
  insertRunningOperation(server.dataDir, operationId, id)
  appendOperationEvent(server.dataDir, id, 1, "queued")
  const before = { ...held }
  const response = await directFollow(`${followPath(id)}?follow=true`, { headers: headers(auth), params: { operation_id: id } })
  return { id, before, response }
}

describe("a followed operation (GET /v1/operations/{id}/events?follow=true)", () => {
  it("is answered with exactly the full stack's bytes and headers, from any Last-Event-ID", async () => {
    await waitOperation(http, auth, operationId)
    await expectFollowParity(followPath(operationId), OPERATION_EVENTS, { operation_id: operationId }, [undefined, "0", "1", "2", "999"])
    expect((await http.get(`${followPath(operationId)}?follow=true`, auth)).text).toContain("event: completed")
  })

  it("follows a running operation: events another process stores arrive, a heartbeat while quiet, the end after the terminal event", async () => {
    const { id, before, response } = await followRunningOperation()
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/event-stream")
    const body = chunks(response)
    const sent: Array<string> = []
    const nextUntil = async (wanted: string) => {
      for (;;) {
        const chunk = await body.next()
        if (chunk === null) throw new Error(`ended before ${wanted}; sent: ${sent.join("")}`)
        sent.push(chunk)
        if (chunk.includes(wanted)) return
      }
    }
    await nextUntil("event: queued")
    // Nothing stored for HEARTBEAT_MS: a comment keeps the stream alive.
    await nextUntil(": heartbeat")
    // Stored by another process (no signal here): found by the follower's own poll.
    appendOperationEvent(server.dataDir, id, 2, "started")
    await nextUntil("event: started")
    execSql(server.dataDir, "UPDATE operations SET state = 'succeeded', completed_at = updated_at WHERE id = ?", id)
    appendOperationEvent(server.dataDir, id, 3, "completed")
    await nextUntil("event: completed")
    expect(await body.next()).toBeNull()
    expect(held).toEqual({ opened: before.opened + 1, closed: before.closed + 1 })
    // The frames, without the heartbeats, are the full stack's.
    const full = await http.get(`${followPath(id)}?follow=true&full=1`, auth)
    expect(sent.join("").replaceAll(": heartbeat\n\n", "")).toBe(full.text)
  })

  it("lets go of a stream whose client went away", async () => {
    const { id, before, response } = await followRunningOperation()
    const body = chunks(response)
    expect(await body.next()).toContain("event: queued")
    expect(held.closed).toBe(before.closed)
    await body.cancel()
    expect(held).toEqual({ opened: before.opened + 1, closed: before.closed + 1 })
  })

  it("cuts a stream whose next event does not decode, and lets it go", async () => {
    const { id, before, response } = await followRunningOperation()
    const body = chunks(response)
    expect(await body.next()).toContain("event: queued")
    execSql(server.dataDir, "INSERT INTO operation_events (operation_id, seq, type, occurred_at, data) VALUES (?, 2, 'started', ?, ?)", id, new Date().toISOString(), '{"broken":')
    await expect(body.next()).rejects.toThrow()
    expect(held).toEqual({ opened: before.opened + 1, closed: before.closed + 1 })
  })

  it("hands everything but a plain follow to the full stack", async () => {
    await waitOperation(http, auth, operationId)
    const key = (await http.post(`/v1/projects/${owner.project_id}/api-keys`, { token: owner.user_token, body: { name: "follow-second" } })).body
    const second: KeyAuth = { token: key.key, project: owner.project_id }
    expect((await http.get(paths().sandbox, second)).status).toBe(200) // sets its last_used_at
    const params = { operation_id: operationId }
    const cases: Array<[string, string, RequestInit & { params: Record<string, string> }]> = [
      ["no credentials", "?follow=true", { params }],
      ["no project header", "?follow=true", { headers: { authorization: `Bearer ${auth.token}` }, params }],
      ["another project's key", "?follow=true", { headers: headers(other), params }],
      ["another key of the project", "?follow=true", { headers: headers(second), params }],
      ["a finite batch", "", { headers: headers(auth), params }],
      ["follow=false", "?follow=false", { headers: headers(auth), params }],
      ["follow=yes", "?follow=yes", { headers: headers(auth), params }],
      ["another parameter", "?follow=true&x=1", { headers: headers(auth), params }],
      ["a Last-Event-ID that is not one", "?follow=true", { headers: headers(auth, { "last-event-id": "-1" }), params }],
      ["a malformed request id", "?follow=true", { headers: headers(auth, { "x-request-id": "bad id!" }), params }],
      ["a DELETE", "?follow=true", { method: "DELETE", headers: headers(auth), params }],
      ["an unknown operation", "?follow=true", { headers: headers(auth), params: { operation_id: "op_nope" } }]
    ]
    for (const [name, query, init] of cases) {
      const response = await directFollow(`${followPath(operationId)}${query}`, init)
      expect({ name, status: response.status }).toEqual({ name, status: HANDED_OVER })
    }
    // Where the full stack answers them.
    expectEnvelope(await http.get(`${followPath(operationId)}?follow=true`, { ...auth, headers: { "last-event-id": "-1" } }), 422, "validation_error")
    expectEnvelope(await http.get(`${followPath(operationId)}?follow=true`, other), 404, "not_found")
    expectEnvelope(await http.get(`${followPath("op_nope")}?follow=true`, auth), 404, "not_found")
    expect((await http.get(`${followPath(operationId)}?follow=true`, second)).status).toBe(404)
  })
})

describe("a followed process (GET /v1/sandboxes/{id}/processes/{id}/events?follow=true)", () => {
  const eventsPath = (id: string) => `/v1/sandboxes/${sandboxId}/processes/${id}/events`

  it("is answered with exactly the full stack's bytes and headers, from any Last-Event-ID", async () => {
    await expectFollowParity(eventsPath(processId), PROCESS_EVENTS, { sandbox_id: sandboxId, process_id: processId }, [undefined, "1", "3", "999"])
    expect((await http.get(`${eventsPath(processId)}?follow=true`, auth)).text).toContain("event: exited")
  })

  it("follows a running process to its exit: its output as the sandbox writes it, then the end", async () => {
    const started = await http.post(`/v1/sandboxes/${sandboxId}/processes`, {
      ...auth, body: { command: ["sh", "-c", "echo one; sleep 1; echo two"] }, headers: { "idempotency-key": `fast-follow-${crypto.randomUUID()}` }
    })
    expect(started.status).toBe(202)
    const id = started.body.id as string
    const before = { ...held }
    const response = await directFollow(`${eventsPath(id)}?follow=true`, { headers: headers(auth), params: { sandbox_id: sandboxId, process_id: id } }, PROCESS_EVENTS)
    expect(response.status).toBe(200)
    const text = await readAll(response)
    expect(held).toEqual({ opened: before.opened + 1, closed: before.closed + 1 })
    const full = await http.get(`${eventsPath(id)}?follow=true&full=1`, auth)
    expect(text.replaceAll(": heartbeat\n\n", "")).toBe(full.text)
    // It was running when followed: a heartbeat while it slept, and both lines.
    expect(text).toContain(": heartbeat")
    expect(full.text).toContain("event: exited")
    expect(full.text).toContain(Buffer.from("two\n").toString("base64"))
  })

  it("hands everything but a plain follow of the caller's process under its own sandbox to the full stack", async () => {
    const params = { sandbox_id: sandboxId, process_id: processId }
    const cases: Array<[string, string, RequestInit & { params: Record<string, string> }]> = [
      ["no credentials", "?follow=true", { params }],
      ["another project's key", "?follow=true", { headers: headers(other), params }],
      ["another sandbox's path", "?follow=true", { headers: headers(auth), params: { ...params, sandbox_id: "sbx_other" } }],
      ["a finite batch", "", { headers: headers(auth), params }],
      ["a Last-Event-ID that is not one", "?follow=true", { headers: headers(auth, { "last-event-id": "x" }), params }],
      ["an unknown process", "?follow=true", { headers: headers(auth), params: { ...params, process_id: "proc_nope" } }]
    ]
    for (const [name, query, init] of cases) {
      const response = await directFollow(`${eventsPath(processId)}${query}`, init, PROCESS_EVENTS)
      expect({ name, status: response.status }).toEqual({ name, status: HANDED_OVER })
    }
    expectEnvelope(await http.get(`${eventsPath(processId)}?follow=true`, other), 404, "not_found")
    expectEnvelope(await http.get(`/v1/sandboxes/sbx_other/processes/${processId}/events?follow=true`, auth), 404, "not_found")
  })
})
