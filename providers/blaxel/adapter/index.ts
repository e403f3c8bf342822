/**
 * Blaxel adapter (reference/providers.md §3.2 "blaxel"), speaking Blaxel's REST APIs through `HttpClient` with a
 * Bearer key, `x-blaxel-workspace` and `Blaxel-Version: 2026-04-28`. Wire facts are from Blaxel's SDK
 * (@blaxel/core, its generated control-API and sandbox-API clients) and its sandbox runtime's handlers.
 *
 * Control API (`apiUrl`, default https://api.blaxel.ai/v0):
 * - `POST /sandboxes?createIfNotExist=true` {metadata: {name: "metal-<sandbox id>", labels: our ids and the
 *   request's metadata that fits Blaxel's label rules}, spec: {region?, runtime: {image, memory, ttl: "<n>m",
 *   envs}}}: a retry answers the existing sandbox, a lost answer is looked up by name, and `GET /sandboxes/{name}`
 *   is polled until `DEPLOYED`. Reconcile = the name, checked against our label. `DELETE /sandboxes/{name}`.
 * - Sizing is direct, by memory: Blaxel gives one vCPU per 2048 MB, so memory = max(the workspace default
 *   (BLAXEL_DEFAULT_MEMORY_MB, 2048), the request's memory, vCPUs × 2048) and the resolved vCPUs are memory / 2048.
 * - Previews are the endpoints (`endpoints.ts`); the cost is provider-reported (`GET /accounts/{account}/metrics`
 *   for the sandbox, the account from BLAXEL_ACCOUNT_ID or `GET /workspaces/{workspace}`).
 *
 * Sandbox runtime (the sandbox's `metadata.url`): processes (`processes.ts`) and files (`files.ts`).
 *
 * Where providers.md and Blaxel's public sources differ, and what this adapter follows:
 * - Paths: the reference sends `/filesystem/<path without its leading slash>`, which Blaxel's runtime resolves
 *   against its working directory; the runtime takes a path as absolute only when its slashes are escaped
 *   (`%2F`), so this adapter sends the absolute path as one escaped segment.
 * - The reference's TTL is the runtime timeout in minutes; here it is that plus five minutes, a safety net behind
 *   the gateway's own timers (as for E2B).
 * - The SDK authenticates with `X-Blaxel-Authorization: Bearer`; the published OpenAPI declares bearer auth, which
 *   the reference (and this adapter) send as `Authorization: Bearer`.
 * - The metrics route is not in the SDK's published clients; it is the reference's (Blaxel's billing explorer).
 *
 * Capabilities: the Blaxel row of reference §3.1 as is — no pause/resume (Blaxel's standby is automatic), no way
 * to keep a sandbox off the internet (so only requests that allow internet access are routed here), buffered
 * output, cancel by kill, files in every write mode, previews as endpoints.
 */
import { makeProvider } from "../../core/makeProvider.ts"
import { makeEndpoints } from "./endpoints.ts"
import { makeFiles } from "./files.ts"
import { makeProcesses } from "./processes.ts"
import { makeSandboxes } from "./sandboxes.ts"
import { type BlaxelProviderConfig, makeContext, NAME } from "./wire.ts"

export {
  API_VERSION,
  BLAXEL_CAPABILITIES,
  type BlaxelProviderConfig,
  DEFAULT_IMAGE,
  executionIds,
  LABEL_SANDBOX_ID,
  processName,
  sandboxName
} from "./wire.ts"

export const makeBlaxelProvider = makeProvider(NAME, {
  context: makeContext,
  calls: (ctx) => ({ capabilities: ctx.capabilities, ...makeSandboxes(ctx), ...makeProcesses(ctx), ...makeFiles(ctx), ...makeEndpoints(ctx) }),
  // BYOK: the organization's key and workspace (and, for cost, its account), against the same API.
  byok: (config) => (credentials) => ({ ...config, apiKey: credentials["api_key"] ?? "", workspace: credentials["workspace"] ?? "", accountId: credentials["account_id"] })
})
