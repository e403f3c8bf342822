/** Append-only: never edit a migration that has shipped; add the next number. */
import accounts from "./0001_accounts.ts"
import sandboxes from "./0002_sandboxes.ts"
import retention from "./0003_retention.ts"
import sandboxDeadline from "./0004_sandbox_deadline.ts"
import webhookDeliveries from "./0005_webhook_deliveries.ts"
import processStdin from "./0006_process_stdin.ts"
import processPty from "./0007_process_pty.ts"
import nodes from "./0008_nodes.ts"
import eventCounters from "./0009_event_counters.ts"
import sandboxOrder from "./0010_sandbox_order.ts"
import sandboxNetwork from "./0011_sandbox_network.ts"
import computerRecordings from "./0012_computer_recordings.ts"
import dashboardSessions from "./0013_dashboard_sessions.ts"
import jobTrace from "./0014_job_trace.ts"

export const migrations = {
  "0001_accounts": accounts,
  "0002_sandboxes": sandboxes,
  "0003_retention": retention,
  "0004_sandbox_deadline": sandboxDeadline,
  "0005_webhook_deliveries": webhookDeliveries,
  "0006_process_stdin": processStdin,
  "0007_process_pty": processPty,
  "0008_nodes": nodes,
  "0009_event_counters": eventCounters,
  "0010_sandbox_order": sandboxOrder,
  "0011_sandbox_network": sandboxNetwork,
  "0012_computer_recordings": computerRecordings,
  "0013_dashboard_sessions": dashboardSessions,
  "0014_job_trace": jobTrace
}
