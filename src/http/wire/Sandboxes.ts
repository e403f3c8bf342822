/**
 * Sandbox-plane rows in their wire form (spec §2.4–2.9; src/domain/Sandbox.ts, Operation.ts, Runtime.ts). Used by
 * the handlers and by FastReads, so a polled GET answers the same bytes either way.
 */
import type { EndpointRow } from "../../db/repos/Endpoints.ts"
import type { OperationRow } from "../../db/repos/Operations.ts"
import type { ProcessRow } from "../../db/repos/Processes.ts"
import type { RuntimeOperationRow } from "../../db/repos/RuntimeOperations.ts"
import type { SandboxRow } from "../../db/repos/Sandboxes.ts"
import { MalformedRow } from "../../domain/MalformedRow.ts"
import type { Operation } from "../../domain/Operation.ts"
import type { Capabilities, Endpoint, Process, ProcessWithOutput, RuntimeOperation } from "../../domain/Runtime.ts"
import type { KeptOutput } from "../../services/sandboxes/ProcessOutput.ts"
import type { Sandbox } from "../../domain/Sandbox.ts"

type CapabilitiesWire = typeof Capabilities.Type

/** The capability snapshot taken when the sandbox became ready, as embedded in its processes, operations and endpoints. */
export const capabilitiesOf = (sandbox: SandboxRow | null | undefined): CapabilitiesWire | null => sandbox?.capabilities ?? null

export const sandboxToWire = (row: SandboxRow): typeof Sandbox.Type => {
  const resolved = row.resolved_resources
  return {
    id: row.id,
    type: "sandbox" as const,
    project_id: row.project_id,
    state: row.state,
    state_reason: row.state_reason,
    requested: row.requested,
    provider: row.provider,
    billing_mode: row.billing_mode,
    resolved_resources: resolved === null
      ? null
      : {
        vcpu: resolved.vcpu,
        memory_mb: resolved.memoryMb,
        disk_mb: resolved.diskMb,
        architecture: resolved.architecture,
        provider_size: resolved.providerSize
      },
    resolved_network: row.resolved_network,
    cost_microusd: row.cost_microusd === null ? null : String(row.cost_microusd),
    cost_updated_at: row.cost_updated_at,
    created_at: row.created_at,
    updated_at: row.updated_at,
    ready_at: row.ready_at,
    paused_at: row.paused_at,
    stopped_at: row.stopped_at,
    expires_at: row.expires_at,
    metadata: row.metadata
  }
}

export const operationToWire = (row: OperationRow): typeof Operation.Type => ({
  id: row.id,
  project_id: row.project_id,
  type: row.type,
  state: row.state,
  resource_type: "sandbox",
  resource_id: row.resource_id,
  retryable: row.error?.retryable ?? false,
  error: row.error,
  created_at: row.created_at,
  updated_at: row.updated_at,
  completed_at: row.completed_at
})

export const mutationToWire = (m: { readonly sandbox: SandboxRow; readonly operation: OperationRow }) => ({
  sandbox: sandboxToWire(m.sandbox),
  operation: operationToWire(m.operation)
})

export const processToWire = (row: ProcessRow, providerCapabilities: CapabilitiesWire | null): typeof Process.Type => ({
  id: row.id,
  type: "process" as const,
  project_id: row.project_id,
  sandbox_id: row.sandbox_id,
  state: row.state,
  command: row.command,
  cwd: row.cwd,
  timeout_seconds: row.timeout_seconds,
  max_output_bytes: row.max_output_bytes,
  output_bytes: row.output_bytes,
  output_truncated: row.output_truncated,
  exit_code: row.exit_code,
  termination_signal: row.termination_signal,
  error: row.error,
  cancel_requested_at: row.cancel_requested_at,
  created_at: row.created_at,
  started_at: row.started_at,
  completed_at: row.completed_at,
  stdin: row.stdin,
  stdin_closed_at: row.stdin_closed_at,
  pty: row.pty_cols === null || row.pty_rows === null ? null : { cols: row.pty_cols, rows: row.pty_rows },
  provider_capabilities: providerCapabilities
})

const utf8 = new TextDecoder("utf-8", { fatal: true })
const lossy = new TextDecoder("utf-8")

/** Where a cut through the middle of a UTF-8 character leaves the text: before that character's first byte. */
const wholeCharacters = (bytes: Uint8Array): Uint8Array => {
  let start = bytes.length
  while (start > 0 && bytes.length - start < 4 && (bytes[start - 1]! & 0xc0) === 0x80) start--
  if (start === 0) return bytes
  const lead = bytes[start - 1]!
  const length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1
  return length > bytes.length - (start - 1) ? bytes.subarray(0, start - 1) : bytes
}

/** One stream as text, with its exact bytes beside it when they are not UTF-8 (a cut character at the cap is not). */
const streamText = (bytes: Uint8Array, capped: boolean): { readonly text: string; readonly base64?: string } => {
  try {
    return { text: utf8.decode(capped ? wholeCharacters(bytes) : bytes) }
  } catch {
    return { text: lossy.decode(bytes), base64: Buffer.from(bytes).toString("base64") }
  }
}

/** A finished process with its output (a run-and-wait's answer). */
export const processWithOutputToWire = (process: typeof Process.Type, output: KeptOutput): typeof ProcessWithOutput.Type => {
  const stdout = streamText(output.stdout, output.capped)
  const stderr = streamText(output.stderr, output.capped)
  return {
    ...process,
    stdout: stdout.text,
    stderr: stderr.text,
    ...(stdout.base64 !== undefined ? { stdout_base64: stdout.base64 } : {}),
    ...(stderr.base64 !== undefined ? { stderr_base64: stderr.base64 } : {}),
    output_capped: output.capped
  }
}

/** The stored result, with a read's bytes (kept in runtime_operation_data) back in it as `data_base64`. */
const resultOf = (row: RuntimeOperationRow): typeof RuntimeOperation.Type["result"] => {
  const stored = row.result
  if (stored !== null && stored.kind === "computer_screenshot") {
    const { data_base64, ...rest } = stored
    if (data_base64 !== undefined) return { ...rest, data_base64 }
    if (row.data === undefined || row.data === null) throw new MalformedRow({ table: "runtime_operation_data", message: `no data for the screenshot ${row.id}` })
    return { ...rest, data_base64: Buffer.from(row.data.buffer, row.data.byteOffset, row.data.byteLength).toString("base64") }
  }
  if (stored === null || stored.kind !== "filesystem_read") return stored
  const { kind, path, data_base64, ...rest } = stored
  if (data_base64 !== undefined) return { kind, path, data_base64, ...rest }
  // Written in the transaction that completed the read, removed only with the operation.
  if (row.data === undefined || row.data === null) throw new MalformedRow({ table: "runtime_operation_data", message: `no data for the read ${row.id}` })
  return { kind, path, data_base64: Buffer.from(row.data.buffer, row.data.byteOffset, row.data.byteLength).toString("base64"), ...rest }
}

export const runtimeOperationToWire = (row: RuntimeOperationRow, providerCapabilities: CapabilitiesWire | null): typeof RuntimeOperation.Type => ({
  id: row.id,
  type: "runtime_operation" as const,
  project_id: row.project_id,
  sandbox_id: row.sandbox_id,
  kind: row.kind,
  state: row.state,
  result: resultOf(row),
  error: row.error,
  created_at: row.created_at,
  started_at: row.started_at,
  completed_at: row.completed_at,
  provider_capabilities: providerCapabilities
})

export const endpointToWire = (row: EndpointRow, providerCapabilities: CapabilitiesWire | null): typeof Endpoint.Type => ({
  id: row.id,
  type: "sandbox_endpoint" as const,
  project_id: row.project_id,
  sandbox_id: row.sandbox_id,
  port: row.port,
  protocol: row.protocol,
  state: row.state,
  url: row.url,
  lease_expires_at: row.lease_expires_at,
  revoked_at: row.revoked_at,
  error: row.error,
  created_at: row.created_at,
  updated_at: row.updated_at,
  provider_capabilities: providerCapabilities
})
