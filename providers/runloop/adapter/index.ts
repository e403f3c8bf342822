/**
 * Runloop adapter (reference/providers.md §3.2 "runloop"), speaking Runloop's REST API through `HttpClient` with
 * `Authorization: Bearer <key>`. Wire facts are from Runloop's API client (@runloop/api-client, generated from its
 * OpenAPI spec).
 *
 * API (`apiUrl`, default https://api.runloop.ai):
 * - `POST /v1/devboxes` {name: "metal-<sandbox id>", metadata: {metal_sandbox_id, metal_project_id,
 *   metal_organization_id, and the request's metadata}, environment_variables, launch_parameters:
 *   {resource_size_request, architecture: "x86_64", keep_alive_time_seconds}, blueprint_id | blueprint_name?}.
 *   Runloop has no create-if-absent, so create first looks for a live devbox carrying our id (as reconcile does);
 *   a lost answer is looked for the same way. `POST /v1/devboxes/{id}/wait_for_status {statuses}` is long-polled
 *   (408: not yet, ask again) until `running`.
 * - Reconcile: `GET /v1/devboxes?status=<s>&limit=100[&starting_after=]` for each live status (Runloop filters by
 *   one), matching `metadata.metal_sandbox_id`. `GET /v1/devboxes/{id}` inspects.
 * - `POST …/suspend` and `…/resume` are pause and resume, each waited on; `POST …/shutdown?force=true` destroys
 *   (a devbox already shut down, or gone, is success). A moved runtime deadline sends `POST …/keep_alive`, which
 *   restarts the keep-alive timer (set at create to the runtime timeout plus 5 min, at most Runloop's 48 h).
 * - Sizing is by preset (`src/providers/resources.ts` RUNLOOP_PRESETS): `provider_options.runloop.resource_size`,
 *   else the first preset covering the request (no smaller than RUNLOOP_RESOURCE_SIZE / the credential's
 *   `resource_size`, when set). Environment sources start from RUNLOOP_BLUEPRINT_ID or
 *   `provider_options.runloop.blueprint_id` (Runloop's default image otherwise); templates name a blueprint.
 * - Cost: `GET …/usage` gives the devbox's active seconds (suspended time excluded), priced at its preset's hourly
 *   rate (or an OEM account's per-component rates on the vCPU/GB seconds it reports): provider-metered.
 * - Processes (`processes.ts`): `execute_async`, `executions/{id}`, `executions/{id}/kill`. Files (`files.ts`):
 *   `download_file`, multipart `upload_file`, paths relative to the user's home.
 *
 * Paths: Runloop's file paths are relative to the devbox user's home, where commands also start, so the gateway's
 * `/workspace` is that home (`withWorkspace` maps `/workspace/…` to `~/…`, sent as home-relative `…`); in emulated
 * mode the home is the jail's `/workspace`, so both modes send the same.
 *
 * Where the reference and Runloop's public client differ, and what this adapter follows:
 * - The reference waits for readiness with `wait_for_status` long-polls of 30 s; the client says the same (the
 *   hold is 30 s, a 408 means poll again). Our request deadline (65 s) is above it.
 * - The reference lists devboxes once (limit 5000) without a status; this adapter lists each live status in
 *   turn (shut-down devboxes, which never match, are never paged through), up to 50 pages of 100 each.
 * - The reference's cost reads "active seconds"; the client's `GET /v1/devboxes/{id}/usage`
 *   (`total_active_seconds`) is where they come from.
 * - An execution's status is `queued | running | completed` only: a kill is told from the shell's exit status
 *   (128 + SIGKILL or SIGTERM, or none), or from this instance having killed it.
 * - `GET …/executions/{id}` may cut long output (`stdout_truncated` / `stderr_truncated`: Runloop streams the
 *   rest over SSE, which this buffered adapter does not read); the exit then says `outputTruncated`.
 *
 * Capabilities: the Runloop row of reference §3.1 as is: suspend/resume, buffered output with kill, files in
 * create/overwrite without parents, listing or delete, no endpoints, x86_64 (Runloop has arm64 devboxes, but the
 * kit's resource mapping sends arm64 requests to modal and northflank only), no stdin or pty.
 */
import { makeProvider } from "../../core/makeProvider.ts"
import { withWorkspace } from "../../core/workspace.ts"
import { makeEndpoints } from "./endpoints.ts"
import { makeFiles } from "./files.ts"
import { makeProcesses } from "./processes.ts"
import { makeSandboxes } from "./sandboxes.ts"
import { HOME, makeContext, NAME, type OemRates, type RunloopProviderConfig } from "./wire.ts"

export { commandLine } from "./processes.ts"
export { WHOLE_FILE_BYTES } from "./files.ts"
export {
  DEFAULT_API_URL,
  devboxName,
  executionIds,
  exitOf,
  METADATA_SANDBOX_ID,
  type OemRates,
  PRESET_HOURLY_MICROUSD,
  RUNLOOP_CAPABILITIES,
  type RunloopProviderConfig
} from "./wire.ts"

/** OEM rates from credential fields: all three, as positive numbers, or none. */
export const oemRatesOf = (fields: { readonly vcpu?: string | undefined; readonly memory?: string | undefined; readonly disk?: string | undefined }): OemRates | undefined => {
  const [vcpu, memory, disk] = [fields.vcpu, fields.memory, fields.disk].map((v) => (v === undefined || v.trim() === "" ? Number.NaN : Number(v)))
  if (![vcpu, memory, disk].every((n) => n !== undefined && Number.isFinite(n) && n >= 0)) return undefined
  return { vcpuHourUsd: vcpu!, memoryGbHourUsd: memory!, diskGbHourUsd: disk! }
}

export const makeRunloopProvider = makeProvider(NAME, {
  context: makeContext,
  calls: (ctx) => withWorkspace({ capabilities: ctx.capabilities, ...makeSandboxes(ctx), ...makeProcesses(ctx), ...makeFiles(ctx), ...makeEndpoints() }, HOME),
  // BYOK: the organization's key, against the same API; its size floor and OEM prices when it gives them.
  byok: (config) => (credentials) => ({
    ...config,
    apiKey: credentials["api_key"] ?? "",
    resourceSize: credentials["resource_size"] ?? config.resourceSize,
    oemRates: oemRatesOf({ vcpu: credentials["vcpu_hour_rate_usd"], memory: credentials["memory_gb_hour_rate_usd"], disk: credentials["disk_gb_hour_rate_usd"] }) ??
      config.oemRates
  })
})
