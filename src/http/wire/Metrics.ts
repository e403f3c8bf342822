/** A sandbox's metrics in their wire form (src/domain/Metrics.ts). */
import type { ProviderMetrics } from "../../providers/Provider.ts"
import type { SandboxRow } from "../../db/repos/Sandboxes.ts"
import type { SandboxMetrics } from "../../domain/Metrics.ts"

/** A count as reported, or null when it is missing or not a plain non-negative number. */
const amount = (n: number | null) => (n !== null && Number.isFinite(n) && n >= 0 ? n : null)

export const metricsToWire = (sandbox: SandboxRow, m: ProviderMetrics): SandboxMetrics => ({
  type: "sandbox_metrics",
  sandbox_id: sandbox.id,
  provider: sandbox.provider!,
  source: m.source,
  collected_at: m.collectedAt,
  cpu_seconds: amount(m.cpuSeconds),
  cpu_used_percent: amount(m.cpuUsedPercent),
  memory_bytes: amount(m.memoryBytes),
  memory_peak_bytes: amount(m.memoryPeakBytes),
  memory_limit_bytes: amount(m.memoryLimitBytes),
  disk_bytes: amount(m.diskBytes),
  disk_limit_bytes: amount(m.diskLimitBytes),
  network_rx_bytes: amount(m.networkRxBytes),
  network_tx_bytes: amount(m.networkTxBytes),
  process_count: amount(m.processCount)
})
