/**
 * Defaults applied over HTTP (spec §2.3, §4.4–4.7, §8) against a real server and a real sandbox: what a client
 * leaves out is filled in, echoed, and behaves as the default says. Every response (and every SSE frame) is also
 * decoded with its wire schema, so a handler that answers off-contract fails here.
 */
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { OperationEventFrame } from "../../src/domain/Operation.ts"
import { Endpoint, Process, ProcessEventFrame, RuntimeOperation } from "../../src/domain/Runtime.ts"
import { Sandbox, SandboxList, SandboxMutation } from "../../src/domain/Sandbox.ts"
import { idempotencyKey, type KeyAuth, parseSse, poll, waitOperation, waitProcess, waitRuntimeOperation } from "../support/sandbox.ts"
import { api, type Bootstrap, bootstrap, type RunningServer, startServer } from "../support/server.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let boot: Bootstrap
let auth: KeyAuth
let sandbox: typeof Sandbox.Type
let created: typeof SandboxMutation.Type

/** The wire schema must accept the body as sent (decode with unknown keys refused, so nothing extra leaks). */
const wire = <A, I>(schema: Schema.Schema<A, I>, body: unknown): A =>
  Schema.decodeUnknownSync(schema, { onExcessProperty: "error" })(body)

const MiB = 1024 * 1024

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  boot = await bootstrap(server.dataDir, "defaults@example.com")
  auth = { token: boot.api_key, project: boot.project_id }
  // Everything optional left out: version, architecture, both timeout actions; recording with no format. The one
  // feature asked for is the port the endpoint defaults below are read on (so placement picks a provider that serves it).
  const res = await http.post("/v1/sandboxes", {
    ...auth,
    headers: { "idempotency-key": idempotencyKey("defaults") },
    body: {
      source: { kind: "environment", environment: "metal/base" },
      resources: { vcpu: 1, memory_mb: 512 },
      lifecycle: { runtime_timeout_seconds: 3600 },
      features: { public_ports: [8000] }
    }
  })
  expect(res.status, res.text).toBe(202)
  created = wire(SandboxMutation, res.body)
  const op = await waitOperation(http, auth, created.operation.id)
  expect(op.state, JSON.stringify(op.error)).toBe("succeeded")
  sandbox = wire(Sandbox, (await http.get(`/v1/sandboxes/${created.sandbox.id}`, auth)).body)
}, 60_000)
afterAll(() => server.stop())

const post = async (route: string, body: unknown, key = true) => {
  const res = await http.post(`/v1/sandboxes/${sandbox.id}/${route}`, { ...auth, body, ...(key ? { headers: { "idempotency-key": idempotencyKey("d") } } : {}) })
  expect(res.status, res.text).toBe(202)
  return res.body
}

/** Starts a file operation with the given body and waits for its result. */
const fileOp = async (kind: "read" | "write" | "list" | "delete", body: unknown) => {
  const started = wire(RuntimeOperation, await post(`filesystem/${kind}`, body, kind === "write" || kind === "delete"))
  expect(started.kind).toBe(`filesystem_${kind}`)
  return wire(RuntimeOperation, await waitRuntimeOperation(http, auth, sandbox.id, started.id))
}

const run = async (command: Array<string>) => {
  const started = wire(Process, await post("processes", { command }))
  const done = wire(Process, await waitProcess(http, auth, sandbox.id, started.id))
  expect(done.state, JSON.stringify(done.error)).toBe("succeeded")
  return { started, done }
}

describe("sandbox request defaults", () => {
  it("create echoes version latest, architecture any, destroy on both timeouts", () => {
    const expected = {
      source: { kind: "environment", environment: "metal/base", version: "latest" },
      resources: { vcpu: 1, memory_mb: 512, architecture: "any" },
      lifecycle: { runtime_timeout_seconds: 3600, on_runtime_timeout: "destroy", on_idle_timeout: "destroy" },
      features: { public_ports: [8000] }
    }
    expect(created.sandbox.requested).toEqual(expected)
    expect(sandbox.requested).toEqual(expected)
    expect(sandbox.state).toBe("ready")
  })

  it("the list and the project alias echo the same request", async () => {
    const list = wire(SandboxList, (await http.get("/v1/sandboxes", auth)).body)
    expect(list.sandboxes.map((s) => s.requested)).toEqual([sandbox.requested])
    const alias = (await http.get(`/v1/projects/${boot.project_id}/sandboxes/${sandbox.id}`, { token: boot.user_token })).body
    expect(wire(Sandbox, alias).requested).toEqual(sandbox.requested)
  })

  it("operation events are frames of the documented shape", async () => {
    const res = await http.get(`/v1/operations/${created.operation.id}/events`, auth)
    expect(res.headers.get("content-type")).toContain("text/event-stream")
    const frames = parseSse(res.text)
    expect(frames.map((f) => f.event)[0]).toBe("queued")
    expect(frames.at(-1)?.event).toBe("completed")
    frames.forEach((f, i) => {
      const data = wire(OperationEventFrame, f.data)
      expect([data.sequence, data.type, data.operation_id]).toEqual([f.id, f.event, created.operation.id])
      expect(data.sequence).toBe(i + 1)
    })
  })
})

describe("process defaults", () => {
  it("timeout 300 s and 10 MiB of output; frames of the documented shape", async () => {
    const { started, done } = await run(["sh", "-c", "echo out; echo err >&2"])
    expect([started.timeout_seconds, started.max_output_bytes]).toEqual([300, 10_485_760])
    expect([done.exit_code, done.output_bytes, done.output_truncated]).toEqual([0, 8, false])
    const frames = parseSse((await http.get(`/v1/sandboxes/${sandbox.id}/processes/${started.id}/events`, auth)).text)
    const decoded = frames.map((f) => wire(ProcessEventFrame, f.data))
    expect(decoded.map((d) => d.sequence)).toEqual(frames.map((f) => f.id))
    expect(decoded[0]?.type).toBe("queued")
    expect(decoded.at(-1)).toMatchObject({ type: "exited", data: { exit_code: 0 } })
    const out = decoded.flatMap((d) => (d.type === "stdout" || d.type === "stderr" ? [[d.type, Buffer.from(d.data.data_base64, "base64").toString()]] : []))
    expect(out.sort()).toEqual([["stderr", "err\n"], ["stdout", "out\n"]])
  })
})

describe("file defaults", () => {
  const big = Buffer.alloc(MiB + 10, 7)

  it("write: overwrite by default (a second write replaces), and no parent directories", async () => {
    const first = await fileOp("write", { path: "/workspace/big.bin", data_base64: big.toString("base64") })
    expect(first.state).toBe("succeeded")
    expect(first.result).toMatchObject({ kind: "filesystem_write", bytes_written: MiB + 10, created: true })
    const again = await fileOp("write", { path: "/workspace/small.txt", data_base64: Buffer.from("first version").toString("base64") })
    expect(again.state).toBe("succeeded")
    const replaced = await fileOp("write", { path: "/workspace/small.txt", data_base64: Buffer.from("abc").toString("base64") })
    expect(replaced.result).toMatchObject({ bytes_written: 3, created: false })
    const read = await fileOp("read", { path: "/workspace/small.txt" })
    expect(read.result).toMatchObject({ data_base64: Buffer.from("abc").toString("base64"), eof: true })
    const orphan = await fileOp("write", { path: "/workspace/no/such/dir/f.txt", data_base64: "" })
    expect(orphan.state).toBe("failed")
  })

  it("read: from offset 0, at most 1 MiB", async () => {
    const read = await fileOp("read", { path: "/workspace/big.bin" })
    expect(read.result).toMatchObject({ kind: "filesystem_read", path: "/workspace/big.bin", offset_bytes: 0, byte_length: MiB, eof: false })
    if (read.result?.kind !== "filesystem_read") throw new Error("not a read result")
    expect(Buffer.from(read.result.data_base64, "base64").equals(big.subarray(0, MiB))).toBe(true)
  })

  it("list: not recursive, at most 1000 entries; delete: not recursive", async () => {
    await run(["sh", "-c", "mkdir -p /workspace/many && cd /workspace/many && i=0; while [ $i -lt 1001 ]; do : > f$i; i=$((i+1)); done"])
    const many = await fileOp("list", { path: "/workspace/many" })
    if (many.result?.kind !== "filesystem_list") throw new Error(JSON.stringify(many))
    expect([many.result.entries.length, many.result.truncated]).toEqual([1000, true])
    const top = await fileOp("list", { path: "/workspace" })
    if (top.result?.kind !== "filesystem_list") throw new Error(JSON.stringify(top))
    const paths = top.result.entries.map((e) => e.path)
    expect(paths).toEqual(expect.arrayContaining(["/workspace/many", "/workspace/big.bin"]))
    expect(paths.some((p) => p.startsWith("/workspace/many/"))).toBe(false)
    const refused = await fileOp("delete", { path: "/workspace/many" })
    expect(refused.state).toBe("failed")
    const still = await fileOp("list", { path: "/workspace/many", max_entries: 1 })
    expect(still.state).toBe("succeeded")
  })
})

describe("endpoint defaults", () => {
  it("protocol http and a lease of 3600 s", async () => {
    const endpoint = wire(Endpoint, await post("endpoints", { port: 8000 }))
    expect(endpoint.protocol).toBe("http")
    expect(Date.parse(endpoint.lease_expires_at) - Date.parse(endpoint.created_at)).toBe(3600 * 1000)
    // The lease stays as created once the endpoint is active.
    const active = await poll(
      async () => wire(Schema.Struct({ endpoints: Schema.Array(Endpoint), next_cursor: Schema.NullOr(Schema.String) }), (await http.get(`/v1/sandboxes/${sandbox.id}/endpoints`, auth)).body),
      (list) => list.endpoints[0]?.state !== "provisioning"
    )
    expect(active.endpoints[0]).toMatchObject({ id: endpoint.id, protocol: "http", lease_expires_at: endpoint.lease_expires_at })
  })
})
