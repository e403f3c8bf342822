/** Helpers for sandbox-plane tests: wait for operations, processes and runtime operations to finish. */
import type { api } from "./server.ts"

type Http = ReturnType<typeof api>

export interface KeyAuth {
  readonly token: string
  readonly project: string
}

const TERMINAL_OPERATION = new Set(["succeeded", "failed", "cancelled"])
const TERMINAL_PROCESS = new Set(["succeeded", "failed", "cancelled", "timed_out"])

export const poll = async <T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 30_000, everyMs = 10): Promise<T> => {
  const deadline = Date.now() + timeoutMs
  while (true) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting; last value: ${String(JSON.stringify(value)).slice(0, 2000)}`)
    await Bun.sleep(everyMs)
  }
}

export const waitOperation = (http: Http, auth: KeyAuth, operationId: string, timeoutMs?: number) =>
  poll(async () => (await http.get(`/v1/operations/${operationId}`, auth)).body, (op) => TERMINAL_OPERATION.has(op?.state), timeoutMs)

export const waitProcess = (http: Http, auth: KeyAuth, sandboxId: string, processId: string, timeoutMs?: number) =>
  poll(async () => (await http.get(`/v1/sandboxes/${sandboxId}/processes/${processId}`, auth)).body, (p) => TERMINAL_PROCESS.has(p?.state), timeoutMs)

export const waitRuntimeOperation = (http: Http, auth: KeyAuth, sandboxId: string, id: string, timeoutMs?: number) =>
  poll(async () => (await http.get(`/v1/sandboxes/${sandboxId}/runtime-operations/${id}`, auth)).body, (r) => r?.state === "succeeded" || r?.state === "failed", timeoutMs)

let keyCounter = 0
export const idempotencyKey = (label = "k") => `${label}-${Date.now()}-${keyCounter++}-${Math.random().toString(36).slice(2)}`

export const minimalSandbox = (overrides: Record<string, unknown> = {}) => ({
  source: { kind: "environment", environment: "metal/base" },
  resources: { vcpu: 1, memory_mb: 512 },
  lifecycle: { runtime_timeout_seconds: 3600 },
  ...overrides
})

/** Creates a sandbox and waits until it is ready; returns the sandbox body. */
export const createReadySandbox = async (http: Http, auth: KeyAuth, body: Record<string, unknown> = minimalSandbox()) => {
  const created = await http.post("/v1/sandboxes", { ...auth, body, headers: { "idempotency-key": idempotencyKey("create") } })
  if (created.status !== 202) throw new Error(`create failed: ${created.status} ${created.text}`)
  const op = await waitOperation(http, auth, created.body.operation.id)
  if (op.state !== "succeeded") throw new Error(`create operation ${op.state}: ${JSON.stringify(op.error)}`)
  return (await http.get(`/v1/sandboxes/${created.body.sandbox.id}`, auth)).body
}

/** Runs a command to completion and returns the process plus its decoded stdout/stderr. */
export const runProcess = async (http: Http, auth: KeyAuth, sandboxId: string, command: Array<string>, extra: Record<string, unknown> = {}) => {
  const started = await http.post(`/v1/sandboxes/${sandboxId}/processes`, {
    ...auth,
    body: { command, ...extra },
    headers: { "idempotency-key": idempotencyKey("proc") }
  })
  if (started.status !== 202) throw new Error(`process start failed: ${started.status} ${started.text}`)
  const process = await waitProcess(http, auth, sandboxId, started.body.id)
  const output = await readProcessOutput(http, auth, sandboxId, started.body.id)
  return { process, ...output }
}

/** Reads every SSE batch of a process and concatenates stdout and stderr. */
export const readProcessOutput = async (http: Http, auth: KeyAuth, sandboxId: string, processId: string) => {
  let last = 0
  let stdout = ""
  let stderr = ""
  const types: Array<string> = []
  while (true) {
    const res = await http.get(`/v1/sandboxes/${sandboxId}/processes/${processId}/events`, { ...auth, headers: { "last-event-id": String(last) } })
    const frames = parseSse(res.text)
    if (frames.length === 0) break
    for (const f of frames) {
      types.push(f.event)
      last = f.id
      const data = f.data.data
      if (f.event === "stdout") stdout += Buffer.from(data.data_base64, "base64").toString()
      if (f.event === "stderr") stderr += Buffer.from(data.data_base64, "base64").toString()
    }
  }
  return { stdout, stderr, types }
}

export const parseSse = (text: string): Array<{ id: number; event: string; data: any }> =>
  text
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) => {
      const fields: Record<string, string> = {}
      for (const line of block.split("\n")) {
        const i = line.indexOf(": ")
        if (i > 0) fields[line.slice(0, i)] = line.slice(i + 2)
      }
      return { id: Number(fields["id"]), event: fields["event"] ?? "", data: JSON.parse(fields["data"] ?? "null") }
    })

/** Deletes a sandbox, waits for its operation to succeed, and checks it reads `stopped`. */
export const destroyAndExpectStopped = async (http: Http, auth: KeyAuth, sandboxId: string) => {
  const deleted = await http.delete(`/v1/sandboxes/${sandboxId}`, { ...auth, headers: { "idempotency-key": idempotencyKey("d") } })
  const op = await waitOperation(http, auth, deleted.body.operation.id)
  if (op.state !== "succeeded") throw new Error(`destroy ${op.state}: ${JSON.stringify(op.error)}`)
  const state = (await http.get(`/v1/sandboxes/${sandboxId}`, auth)).body.state
  if (state !== "stopped") throw new Error(`the destroyed sandbox reads ${state}, not stopped`)
}

/** A request no configured provider may take: its create fails with `no_eligible_provider` (or is refused at once); the error. */
export const expectNoEligibleProvider = async (http: Http, auth: KeyAuth, body: Record<string, unknown>) => {
  const res = await http.post("/v1/sandboxes", { ...auth, body, headers: { "idempotency-key": idempotencyKey("n") } })
  if (res.status !== 202) {
    if (res.status !== 422) throw new Error(`the create answered ${res.status}: ${res.text}`)
    return res.body
  }
  const op = await waitOperation(http, auth, res.body.operation.id)
  if (op.state !== "failed" || op.error?.code !== "no_eligible_provider") throw new Error(`expected no_eligible_provider, got ${op.state}: ${JSON.stringify(op.error)}`)
  return op.error
}

/** Bytes a text transfer would mangle (NUL, high bytes, CR, LF): what a file round trip sends. */
export const BINARY_BYTES = Buffer.from([0, 1, 2, 253, 254, 255, 10, 13])

/**
 * Writes BINARY_BYTES to `path` through the filesystem API (`create_parents` when asked), reads them back, and
 * checks each step succeeded with the exact bytes.
 */
export const expectBinaryRoundTrip = async (http: Http, auth: KeyAuth, sandboxId: string, path: string, options: { readonly createParents?: boolean } = {}) => {
  const write = await http.post(`/v1/sandboxes/${sandboxId}/filesystem/write`, {
    ...auth,
    body: { path, data_base64: BINARY_BYTES.toString("base64"), ...(options.createParents === true ? { create_parents: true } : {}) },
    headers: { "idempotency-key": idempotencyKey("w") }
  })
  // Checked by hand, not with vitest's expect: the benchmark imports this file too (as expectEnvelope does).
  const written = await waitRuntimeOperation(http, auth, sandboxId, write.body.id)
  if (written.state !== "succeeded") throw new Error(`the write of ${path} ended ${written.state}: ${JSON.stringify(written.error)}`)
  const read = await http.post(`/v1/sandboxes/${sandboxId}/filesystem/read`, { ...auth, body: { path } })
  const readOp = await waitRuntimeOperation(http, auth, sandboxId, read.body.id)
  const back = Buffer.from(readOp.result?.data_base64 ?? "", "base64")
  if (!back.equals(BINARY_BYTES)) throw new Error(`${path} read back as [${[...back].join(", ")}], not [${[...BINARY_BYTES].join(", ")}]`)
}
