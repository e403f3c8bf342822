/**
 * Two gateway processes on one PostgreSQL database (issue 9, docs/operations/scaling-out.md), each with its own DATA_DIR and
 * NODE_ID, started together (the migrations run once, under their lock). PostgreSQL run only.
 *
 * - 20 parallel creates with one Idempotency-Key, spread across both → one sandbox, one provider resource;
 * - a process started through the sandbox's node is read, followed (live) and cancelled through the other;
 * - raw files (a synchronous provider call) and an endpoint (a request, a WebSocket) reached through the other
 *   node are forwarded to the sandbox's node (signed with CLUSTER_SECRET); terminal attach and host-addressed
 *   endpoints: replicas-forwarding.test.ts;
 * - SIGKILL of the sandbox's node → after the grace period the other reports the sandbox `failed`, `node_lost`,
 *   and /ready shows the node lost.
 */
import { afterAll, describe, expect, it } from "vitest"
import { querySql } from "../support/accounts.ts"
import { connectWebSocket, startEchoServer } from "../support/endpoints.ts"
import { databaseUrlFor, onPostgres } from "../support/postgres.ts"
import { idempotencyKey, minimalSandbox, parseSse, poll, waitOperation } from "../support/sandbox.ts"
import { api, bootstrap, destroyJails, type RunningServer, startServer, tempDataDir } from "../support/server.ts"

const servers: Array<RunningServer> = []

afterAll(async () => {
  for (const server of servers) await server.stop()
})

const followFrames = async (url: string, auth: { token: string; project: string }) => {
  const response = await fetch(url, { headers: { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project } })
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  return async (): Promise<{ id: number; event: string; data: any } | null> => {
    for (;;) {
      const end = buffer.indexOf("\n\n")
      if (end >= 0) {
        const block = buffer.slice(0, end + 2)
        buffer = buffer.slice(end + 2)
        const frames = parseSse(block)
        if (frames.length > 0) return frames[0]!
        continue
      }
      const { done, value } = await reader.read()
      if (done) return null
      buffer += decoder.decode(value, { stream: true })
    }
  }
}

describe.skipIf(!onPostgres())("two replicas on one PostgreSQL database", () => {
  it("create once across replicas; a process followed and cancelled through the other node; a killed node's sandbox is node_lost", async () => {
    const dataA = tempDataDir("node-a")
    const dataB = tempDataDir("node-b")
    const url = databaseUrlFor(dataA)!
    const env = (node: string) => ({ DATABASE_URL: url, NODE_ID: node, NODE_GRACE_SECONDS: "5", CLUSTER_SECRET: "replicas-test-cluster-secret" })
    const [a, b] = await Promise.all([startServer({ dataDir: dataA, env: env("node-a") }), startServer({ dataDir: dataB, env: env("node-b") })])
    servers.push(a, b)
    const boot = await bootstrap(dataA, "replicas@example.com")
    const auth = { token: boot.api_key, project: boot.project_id }
    const http = { a: api(a.url), b: api(b.url) }

    // 20 same-key creates, alternating replicas, all at once.
    const key = idempotencyKey("replicas")
    const creates = await Promise.all(Array.from({ length: 20 }, (_, i) =>
      (i % 2 === 0 ? http.a : http.b).post("/v1/sandboxes", { ...auth, body: minimalSandbox({ features: { public_ports: [9000, 9001] } }), headers: { "idempotency-key": key } })))
    expect(creates.map((c) => c.status)).toEqual(Array.from({ length: 20 }, () => 202))
    const sandboxId: string = creates[0]!.body.sandbox.id
    expect(new Set(creates.map((c) => c.body.sandbox.id))).toEqual(new Set([sandboxId]))
    expect((await waitOperation(http.b, auth, creates[0]!.body.operation.id)).state).toBe("succeeded")
    expect(querySql<{ n: number }>(dataA, "SELECT COUNT(*) AS n FROM sandboxes")).toEqual([{ n: 1 }])
    expect(querySql<{ n: number }>(dataA, "SELECT COUNT(*) AS n FROM provider_attempts WHERE outcome = 'created'")).toEqual([{ n: 1 }])
    const [{ node_id: owner }] = querySql<{ node_id: string }>(dataA, "SELECT node_id FROM sandboxes WHERE id = ?", sandboxId) as [{ node_id: string }]
    expect(["node-a", "node-b"]).toContain(owner)
    const [home, away] = owner === "node-a" ? [http.a, http.b] as const : [http.b, http.a] as const
    const [homeServer, awayServer] = owner === "node-a" ? [a, b] : [b, a]
    const homeData = owner === "node-a" ? dataA : dataB

    // Started through the sandbox's node; read, followed and cancelled through the other.
    const started = await home.post(`/v1/sandboxes/${sandboxId}/processes`, {
      ...auth,
      body: { command: ["sh", "-c", "echo one; sleep 60"] },
      headers: { "idempotency-key": idempotencyKey() }
    })
    expect(started.status).toBe(202)
    const processId: string = started.body.id
    const next = await followFrames(`${awayServer.url}/v1/sandboxes/${sandboxId}/processes/${processId}/events?follow=true`, auth)
    const seen: Array<string> = []
    for (;;) {
      const frame = await next()
      expect(frame).not.toBeNull()
      seen.push(frame!.event)
      if (frame!.event === "stdout") {
        expect(Buffer.from(frame!.data.data.data_base64, "base64").toString()).toBe("one\n")
        break
      }
    }
    expect((await away.get(`/v1/sandboxes/${sandboxId}/processes/${processId}`, auth)).body.state).toBe("running")
    const cancel = await away.post(`/v1/sandboxes/${sandboxId}/processes/${processId}/actions/cancel`, { ...auth, headers: { "idempotency-key": idempotencyKey() } })
    expect(cancel.status).toBe(202)
    for (let frame = await next(); frame !== null; frame = await next()) seen.push(frame.event)
    expect(seen.at(-1)).toBe("cancelled")
    expect((await away.get(`/v1/sandboxes/${sandboxId}/processes/${processId}`, auth)).body.state).toBe("cancelled")

    // Raw files call the provider at once: through the other node they are forwarded to the sandbox's.
    const rawHeaders = { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project }
    const rawUrl = `${awayServer.url}/v1/sandboxes/${sandboxId}/files/content?path=${encodeURIComponent("/workspace/far.txt")}`
    const put = await fetch(rawUrl, { method: "PUT", headers: { ...rawHeaders, "content-type": "application/octet-stream" }, body: "from the other node" })
    expect(put.status).toBe(201)
    const got = await fetch(rawUrl, { headers: rawHeaders })
    expect(got.status).toBe(200)
    expect(await got.text()).toBe("from the other node")
    // A client's own forward mark does not verify against CLUSTER_SECRET: the request is still forwarded, and served.
    const spoofed = await fetch(rawUrl, { headers: { ...rawHeaders, "x-gateway-forwarded-by": `${owner};0000` } })
    expect(await spoofed.text()).toBe("from the other node")

    // An endpoint created through the other node, reached through that node's endpoint listener.
    await home.post(`/v1/sandboxes/${sandboxId}/processes`, { ...auth, body: { command: ["python3", "-m", "http.server", "9000", "--directory", "/workspace"] }, headers: { "idempotency-key": idempotencyKey() } })
    const ep = await away.post(`/v1/sandboxes/${sandboxId}/endpoints`, { ...auth, body: { port: 9000, lease_seconds: 120 }, headers: { "idempotency-key": idempotencyKey() } })
    expect(ep.status).toBe(202)
    const active = await poll(async () => (await away.get(`/v1/sandboxes/${sandboxId}/endpoints`, auth)).body.endpoints.find((e: any) => e.id === ep.body.id), (e) => e?.state === "active")
    expect(active.url.startsWith(awayServer.endpointUrl)).toBe(true)
    expect(await poll(async () => (await fetch(`${active.url}far.txt`)).status, (s) => s === 200, 20_000, 100)).toBe(200)
    expect(await (await fetch(`${active.url}far.txt`)).text()).toBe("from the other node")
    // A WebSocket through that endpoint listener is relayed to the sandbox's node too.
    await startEchoServer(home, auth, sandboxId, 9001)
    const wsEp = await away.post(`/v1/sandboxes/${sandboxId}/endpoints`, { ...auth, body: { port: 9001, lease_seconds: 120 }, headers: { "idempotency-key": idempotencyKey() } })
    const wsActive = await poll(async () => (await away.get(`/v1/sandboxes/${sandboxId}/endpoints`, auth)).body.endpoints.find((e: any) => e.id === wsEp.body.id), (e) => e?.state === "active")
    await poll(async () => (await fetch(wsActive.url).catch(() => undefined))?.status, (s) => s === 200, 20_000, 100)
    const socket = connectWebSocket(`${wsActive.url}chat`, ["chat"])
    await socket.opened
    socket.ws.send("ping")
    await socket.until("the echo", () => socket.got.length >= 2)
    expect(socket.got).toEqual(["hello /chat", "ping"])
    socket.ws.send("bye")
    await socket.until("the close", () => socket.state.closed !== null)
    expect(socket.state.closed).toEqual({ code: 4001, reason: "bye from the sandbox" })

    // Both nodes beat; then the sandbox's node dies.
    const ready = (await away.get("/ready")).body
    expect(ready.nodes.map((n: { id: string }) => n.id).sort()).toEqual(["node-a", "node-b"])
    await homeServer.stop({ kill: true })
    servers.splice(servers.indexOf(homeServer), 1)
    const lost = await poll(async () => (await away.get(`/v1/sandboxes/${sandboxId}`, auth)).body, (s) => s.state === "failed", 30_000)
    expect(lost.state_reason).toBe("node_lost")
    const after = (await away.get("/ready")).body
    expect(after.nodes.find((n: { id: string }) => n.id === owner)).toMatchObject({ lost: true })
    expect(after.nodes.find((n: { id: string }) => n.id !== owner)).toMatchObject({ lost: false })
    await destroyJails(homeData)
  }, 120_000)
})
