/**
 * Create → ready through the API (issue 3: p50 ≤ 100 ms), on each plugin through its emulator (issue 11), and from
 * a cached OCI image (issue 14). Every sandbox measured is deleted before the next measurement, so none shares the
 * machine with it.
 */
import { alpineLike, startRegistry } from "../test/support/registry.ts"
import { idempotencyKey, minimalSandbox, poll } from "../test/support/sandbox.ts"
import { type BenchGateway, ROUNDS, time, warmCreates } from "./measure.ts"
import { report } from "./report.ts"

/** Creates per plugin in the per-provider create → ready rows (after one warm-up). */
const PER_PLUGIN_ROUNDS = Number(process.env["BENCH_PLUGIN_ROUNDS"] ?? 5)
const INTERNET = { network: { internet_access: true } }
/** Every plugin, with what a request needs to be placed on it. */
const PER_PLUGIN: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
  ["daytona", {}],
  ["e2b", {}],
  ["blaxel", INTERNET],
  ["cloudflare", INTERNET],
  ["freestyle", INTERNET],
  ["prime", { ...INTERNET, resources: { vcpu: 0.5, memory_mb: 500 } }],
  ["runloop", INTERNET],
  ["vercel", { network: { internet_access: false } }]
]

export const benchCreate = async ({ server, http, auth }: BenchGateway) => {
  // 1. create → ready, through the API (routed; the client polls the operation).
  const created: Array<string> = []
  const requestCreate = () => http.post("/v1/sandboxes", { ...auth, body: minimalSandbox(), headers: { "idempotency-key": idempotencyKey("b") } })
  const createOne = async () => {
    const res = await requestCreate()
    await poll(async () => (await http.get(`/v1/operations/${res.body.operation.id}`, auth)).body, (op) => op.state === "succeeded", 30_000, 2)
    return res.body.sandbox.id as string
  }
  // Back to back: each create also pays, in CPU, for the warm jail started to replace the one it took.
  const createReady = await time(async () => created.push(await createOne()), Math.min(ROUNDS, 20), 2)
  report("create → ready (API)", createReady, undefined, "p50 ≤ 100 ms")
  // The measured sandboxes go away before the next measurements, so they do not share the machine with them.
  const stopped = () => poll(async () => (await http.get("/v1/sandboxes?limit=100", auth)).body.sandboxes, (list) => list.every((s: any) => s.state === "stopped"), 60_000, 50)
  await Promise.all(created.map((id) => http.delete(`/v1/sandboxes/${id}`, auth)))
  await stopped()
  // One at a time, each alone, the pool refilled in between (issue 28: "warm pool"): what a create waits for when
  // it finds a warm jail. The default network (internet), as above.
  const warmReady = await warmCreates(createOne, (id) => http.delete(`/v1/sandboxes/${id}`, auth), ROUNDS)
  report("  create → ready, a warm jail each", warmReady, undefined, "p50 ≤ 20 ms, p90 ≤ 40 ms")
  await stopped()
  // The same, waited for as an agent waits: following the operation's events to its end (`?follow=true`) instead
  // of polling it.
  const followOne = async () => {
    const res = await requestCreate()
    const followed = await fetch(`${server.url}/v1/operations/${res.body.operation.id}/events?follow=true`, {
      headers: { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project }
    })
    const text = await followed.text()
    if (!text.includes("event: completed")) throw new Error(`the followed create ended without completing: ${text}`)
    return res.body.sandbox.id as string
  }
  report("  (the same, followed)", await warmCreates(followOne, (id) => http.delete(`/v1/sandboxes/${id}`, auth), ROUNDS))
  await stopped()

  // 1b. create → ready on each plugin through its emulator (issue 11): a few creates per provider, pinned with
  // `provider`, with the network each needs (most cannot keep a sandbox off the internet; Prime sizes are fixed).
  for (const [provider, extra] of PER_PLUGIN) {
    const mine: Array<string> = []
    const s = await time(async () => {
      const res = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider, ...extra }), headers: { "idempotency-key": idempotencyKey(provider) } })
      if (res.status !== 202) throw new Error(`create on ${provider} answered ${res.status}: ${res.text}`)
      const op = await poll(async () => (await http.get(`/v1/operations/${res.body.operation.id}`, auth)).body, (o) => ["succeeded", "failed", "cancelled"].includes(o.state), 30_000, 2)
      if (op.state !== "succeeded") throw new Error(`create on ${provider} ${op.state}: ${JSON.stringify(op.error)}`)
      mine.push(res.body.sandbox.id)
    }, PER_PLUGIN_ROUNDS, 1)
    report(`  create → ready, ${provider} emulator`, s)
    await Promise.all(mine.map((id) => http.delete(`/v1/sandboxes/${id}`, auth)))
  }
  await poll(async () => (await http.get("/v1/sandboxes?limit=100", auth)).body.sandboxes, (list) => list.every((s: any) => s.state === "stopped"), 60_000, 50)

  // 1c. create → ready from an OCI image whose layers are cached already (issue 14): a registry on loopback with a
  // small image, pulled once by a first create; then each create unpacks nothing new, only mounts its layers.
  const registry = startRegistry()
  registry.push("bench/alpine", "1", { layers: [[...alpineLike()]] })
  const image = `${registry.host}/bench/alpine:1`
  const mine: Array<string> = []
  const s = await time(async () => {
    const res = await http.post("/v1/sandboxes", { ...auth, body: minimalSandbox({ provider: "daytona", source: { kind: "oci_image", image } }), headers: { "idempotency-key": idempotencyKey("oci") } })
    const op = await poll(async () => (await http.get(`/v1/operations/${res.body.operation.id}`, auth)).body, (o) => ["succeeded", "failed", "cancelled"].includes(o.state), 60_000, 2)
    if (op.state !== "succeeded") throw new Error(`create from ${image} ${op.state}: ${JSON.stringify(op.error)}`)
    mine.push(res.body.sandbox.id)
  }, PER_PLUGIN_ROUNDS, 1)
  report("create → ready, cached OCI image", s)
  await Promise.all(mine.map((id) => http.delete(`/v1/sandboxes/${id}`, auth)))
  await poll(async () => (await http.get("/v1/sandboxes?limit=100", auth)).body.sandboxes, (list) => list.every((x: any) => x.state === "stopped"), 60_000, 50)
  registry.stop()
}
