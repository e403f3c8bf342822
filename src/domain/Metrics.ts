/** What a sandbox consumes now (`GET /v1/sandboxes/{id}/metrics`). */
import { Schema } from "effect"
import { Timestamp } from "./Accounts.ts"
import { SandboxId } from "./Ids.ts"
import { Provider } from "./Sandbox.ts"

const Amount = (description: string) => Schema.NullOr(Schema.Number.pipe(Schema.nonNegative())).annotations({ description })

export const SandboxMetrics = Schema.Struct({
  type: Schema.Literal("sandbox_metrics"),
  sandbox_id: SandboxId,
  provider: Provider,
  source: Schema.Literal("local_runtime", "provider").annotations({
    description: "`local_runtime`: read on this host from the sandbox's cgroups, disk and network namespace; `provider`: the provider's metrics API (its latest sample)"
  }),
  collected_at: Timestamp,
  cpu_seconds: Amount("CPU time used by everything in the sandbox since it started"),
  cpu_used_percent: Amount("Recent CPU use as a percentage of the sandbox's CPUs (providers that sample it)"),
  memory_bytes: Amount("Memory used by the sandbox's processes now (page cache included)"),
  memory_peak_bytes: Amount("Most memory its processes have used at once"),
  memory_limit_bytes: Amount("The memory its processes may use"),
  disk_bytes: Amount("Bytes used on the sandbox's disk"),
  disk_limit_bytes: Amount("Size of the sandbox's disk"),
  network_rx_bytes: Amount("Bytes received from outside the sandbox (0 without internet access)"),
  network_tx_bytes: Amount("Bytes sent outside the sandbox (0 without internet access)"),
  process_count: Amount("Processes and threads of the sandbox's commands")
}).annotations({ identifier: "SandboxMetrics" })
export type SandboxMetrics = typeof SandboxMetrics.Type
