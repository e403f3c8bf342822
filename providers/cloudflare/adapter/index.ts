/**
 * Cloudflare Sandbox adapter (reference/providers.md §3.2 "cloudflare"). `@cloudflare/sandbox` runs only inside
 * Workers, so this adapter speaks to a bridge Worker the operator deploys (`providers/cloudflare/bridge/`: REST +
 * SSE, `Authorization: Bearer <token>`; the wire is in `wire.ts`):
 * - sandboxes (`sandboxes.ts`): bodiless create polled on `/running`, remembered in memory for idempotency and
 *   reconcile; inspect; destroy; no pause; cost from Cloudflare's container analytics when an account id and an
 *   analytics token are configured (else the capability says no cost);
 * - commands (`processes.ts`): one SSE stream per command, read in the background; environment through `env`; no
 *   stdin, terminals or cancel; at most the bridge's 30 s;
 * - files (`files.ts`): ranged GET and PUT under `/workspace/` only; create, overwrite and append
 *   (read-modify-write); no parents, list or delete;
 * - no HTTP endpoints (`endpoints.ts`).
 */
import { makeProvider } from "../../core/makeProvider.ts"
import { makeEndpoints } from "./endpoints.ts"
import { makeFiles } from "./files.ts"
import { makeProcesses } from "./processes.ts"
import { makeSandboxes } from "./sandboxes.ts"
import { type CloudflareProviderConfig, makeContext, NAME } from "./wire.ts"

export { applyFrame, argvWithEnvironment } from "./processes.ts"
export {
  BRIDGE_REQUEST_TIMEOUT_MS,
  bridgePath,
  cloudflareCapabilities,
  type CloudflareProviderConfig,
  costLabel,
  DEFAULT_ANALYTICS_URL,
  makeSseParser,
  RATE_CARD,
  usageCostMicrousd
} from "./wire.ts"

export const makeCloudflareProvider = makeProvider(NAME, {
  context: makeContext,
  calls: (ctx) => ({ capabilities: ctx.capabilities, ...makeSandboxes(ctx), ...makeProcesses(ctx), ...makeFiles(ctx), ...makeEndpoints() }),
  // BYOK: the organization's own bridge (URL and token), and its analytics account for cost.
  byok: (config) => (credentials) => ({
    ...config,
    apiUrl: credentials["api_url"] ?? "",
    apiKey: credentials["api_key"] ?? "",
    accountId: credentials["account_id"],
    analyticsToken: credentials["analytics_token"]
  })
})
