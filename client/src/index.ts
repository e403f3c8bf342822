/**
 * A typed client for Sandbox Gateway. `raw` is the server's own HttpApi contract turned into a client
 * (`HttpApiClient`), so its routes, parameters and shapes cannot drift from the server's; the Promise layer on
 * top does what is awkward with raw calls: create-and-wait, run-and-follow, files beyond one call's size,
 * endpoints that are ready to use, typed errors, and retries of retryable failures with the same
 * Idempotency-Key (a retried create never makes a second sandbox).
 *
 *   const gw = createClient({ baseUrl: "http://127.0.0.1:8080", apiKey: "metal_sk_…", projectId: "prj_…" })
 *   const sandbox = await gw.sandboxes.create({ source: { kind: "environment", environment: "metal/base" },
 *     resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 600 } })
 *   const { exitCode, stdout } = await sandbox.exec(["python3", "-c", "print(6*7)"], { onOutput: (s, t) => process.stdout.write(t) })
 *   await sandbox.destroy()
 */
import { Schema } from "effect"
import { RecordingId, SandboxId } from "../../src/domain/Ids.ts"
import type { Capabilities, Endpoint } from "../../src/domain/Runtime.ts"
import { type Sandbox as SandboxWire, SandboxRequest } from "../../src/domain/Sandbox.ts"
import { makeComputer } from "./computer.ts"
import { fromResponse, GatewayError } from "./errors.ts"
import { makeFiles } from "./files.ts"
import { makeProcesses } from "./processes.ts"
import { type ClientOptions, idempotencyKey, invalid, makeTransport, namedId, POLL_MS, sleep } from "./transport.ts"

export { GatewayError, type GatewayErrorCode } from "./errors.ts"
/** The API's error codes by status, each with its meaning; `raw` calls fail with their route's own codes, typed. */
export { ERROR_CODES, type ErrorCode } from "../../src/domain/ErrorCodes.ts"
export type { ComputerActionInput, RecordingRecord, Screenshot, ScreenshotOptions } from "./computer.ts"
export type { DownloadOptions, UploadOptions } from "./files.ts"
export type { AttachOptions, ExecOptions, ExecResult, ProcessRecord, TerminalOptions } from "./processes.ts"
export type { AttachHandlers, Terminal, TerminalExit, WebSocketConstructor } from "./terminal.ts"
export type { ClientOptions } from "./transport.ts"

export type SandboxRecord = Schema.Schema.Type<typeof SandboxWire>
export type CreateSandbox = Schema.Schema.Encoded<typeof SandboxRequest>
export type EndpointRecord = Schema.Schema.Type<typeof Endpoint>

/** A create request checked (and its defaults filled) before it is sent: a mistake is a validation_error here. */
const decodeRequest = (request: CreateSandbox) => {
  const decoded = Schema.decodeUnknownEither(SandboxRequest, { errors: "all" })(request)
  if (decoded._tag === "Left") throw invalid(decoded.left)
  return decoded.right
}

export const createClient = (options: ClientOptions) => {
  const t = makeTransport(options)
  const { call, waitOperation, waitRuntimeOperation } = t

  const handle = (record: SandboxRecord) => {
    const id = record.id
    const mutate = async (action: "pause" | "resume" | "delete", waitMs = 120_000) => {
      // Pause, resume and delete are idempotent by state: sending one again is safe without a key.
      const mutation = await call((c) => (action === "delete" ? c.sandboxes.delete({ path: { sandbox_id: id } }) : c.sandboxes[action]({ path: { sandbox_id: id } })))
      const op = await waitOperation(mutation.operation.id, waitMs)
      if (op.state !== "succeeded") throw new GatewayError(op.error?.code ?? "operation_failed", op.error?.message ?? `The ${action} ended ${op.state}`, 0, op.retryable, op.error?.details)
      return op
    }

    /** The provider's capability manifest, asked once. */
    let capabilitiesOnce: Promise<Schema.Schema.Type<typeof Capabilities>> | undefined
    const capabilities = () => {
      capabilitiesOnce ??= call((c) => c.sandboxes.capabilities({ path: { sandbox_id: id } })).catch((e: unknown) => {
        capabilitiesOnce = undefined
        throw e
      })
      return capabilitiesOnce
    }
    const processes = makeProcesses(t, id, capabilities)

    const expose = async (port: number, o: { readonly leaseSeconds?: number } = {}): Promise<EndpointRecord> => {
      let endpoint = await call((c) =>
        c.endpoints.create({ path: { sandbox_id: id }, headers: { "idempotency-key": idempotencyKey() }, payload: { port, protocol: "http", lease_seconds: o.leaseSeconds ?? 3600 } }))
      while (endpoint.state === "provisioning") {
        await sleep(POLL_MS)
        const list = await call((c) => c.endpoints.list({ path: { sandbox_id: id }, urlParams: { limit: 100 } }))
        endpoint = list.endpoints.find((e) => e.id === endpoint.id) ?? endpoint
      }
      if (endpoint.state !== "active") throw new GatewayError(endpoint.error?.code ?? "endpoint_failed", endpoint.error?.message ?? `The endpoint is ${endpoint.state}`, 0, false)
      return endpoint
    }

    return {
      id,
      record,
      /** The sandbox as the gateway has it now. */
      refresh: () => call((c) => c.sandboxes.get({ path: { sandbox_id: id } })),
      exec: processes.exec,
      attach: processes.attach,
      terminal: processes.terminal,
      shell: processes.shell,
      files: makeFiles(t, id, { capabilities, exec: processes.exec }),
      /** Serves `port` of the sandbox at a URL; resolves once the endpoint is active. */
      expose,
      /** The desktop of a sandbox created with `features: { computer_use: true }` (computer.ts). */
      computer: makeComputer({
        act: async (action) => {
          const key = idempotencyKey()
          // The contract's client takes one member of the actions' union at a time; any member encodes the same way.
          const payload = action as Extract<typeof action, { readonly type: "mouse_move" }>
          return waitRuntimeOperation(id, await call((c) => c.computer.action({ path: { sandbox_id: id }, headers: { "idempotency-key": key }, payload })))
        },
        screenshot: async (payload) => waitRuntimeOperation(id, await call((c) => c.computer.screenshot({ path: { sandbox_id: id }, payload }))),
        startRecording: (label) => {
          const key = idempotencyKey()
          return call((c) => c.computer.startRecording({ path: { sandbox_id: id }, headers: { "idempotency-key": key }, payload: { format: "mp4", ...(label === undefined ? {} : { label }) } }))
        },
        getRecording: (recording) => call((c) => c.computer.getRecording({ path: { sandbox_id: id, recording_id: namedId(RecordingId, recording) } })),
        stopRecording: (recording) => call((c) => c.computer.stopRecording({ path: { sandbox_id: id, recording_id: namedId(RecordingId, recording) }, headers: {} })),
        listRecordings: async () => (await call((c) => c.computer.listRecordings({ path: { sandbox_id: id }, urlParams: { limit: 100 } }))).recordings,
        recordingContent: async (recording) => {
          const response = await t.fetch(`${t.baseUrl}/v1/sandboxes/${id}/recordings/${recording}/content`, { headers: t.authHeaders })
          if (response.status !== 200) throw await fromResponse(response)
          return new Uint8Array(await response.arrayBuffer())
        },
        expose: (port, o) => expose(port, o),
        sleep: (ms) => sleep(ms).then(() => undefined)
      }),
      extend: (seconds: number) => call((c) => c.sandboxes.extend({ path: { sandbox_id: id }, payload: { runtime_timeout_seconds: seconds } })),
      metrics: () => call((c) => c.sandboxes.metrics({ path: { sandbox_id: id } })),
      pause: () => mutate("pause"),
      resume: () => mutate("resume"),
      destroy: () => mutate("delete")
    }
  }

  return {
    /** The contract's client (Effect): every route of the API, typed. */
    raw: t.rawClient,
    environments: {
      /** What `source.environment` can name: the names, their versions and the providers that create each. */
      list: async () => (await call((c) => c.environments.list())).environments
    },
    sandboxes: {
      /**
       * Creates a sandbox and (unless `wait: false`) resolves once it is ready. Retried after a lost answer with
       * the same Idempotency-Key, so one request makes at most one sandbox.
       */
      create: async (request: CreateSandbox, o: { readonly wait?: boolean; readonly timeoutMs?: number } = {}) => {
        const payload = decodeRequest(request)
        const key = idempotencyKey()
        const mutation = await call((c) => c.sandboxes.create({ headers: { "idempotency-key": key }, payload }))
        if (o.wait === false) return handle(mutation.sandbox)
        const op = await waitOperation(mutation.operation.id, o.timeoutMs ?? 300_000)
        if (op.state !== "succeeded") {
          throw new GatewayError(op.error?.code ?? "sandbox_failed", op.error?.message ?? `The sandbox could not be created (${op.state})`, 0, op.retryable, op.error?.details)
        }
        return handle(await call((c) => c.sandboxes.get({ path: { sandbox_id: mutation.sandbox.id } })))
      },
      get: async (id: string) => handle(await call((c) => c.sandboxes.get({ path: { sandbox_id: namedId(SandboxId, id) } }))),
      list: (filter: { readonly state?: ReadonlyArray<SandboxRecord["state"]>; readonly provider?: SandboxRecord["provider"] & string; readonly limit?: number; readonly cursor?: string } = {}) =>
        call((c) =>
          c.sandboxes.list({
            urlParams: {
              limit: filter.limit ?? 50,
              ...(filter.cursor !== undefined ? { cursor: filter.cursor } : {}),
              ...(filter.state !== undefined ? { state: filter.state } : {}),
              ...(filter.provider !== undefined ? { provider: filter.provider } : {})
            }
          }))
    }
  }
}

export type GatewayClient = ReturnType<typeof createClient>
export type SandboxHandle = Awaited<ReturnType<GatewayClient["sandboxes"]["get"]>>
