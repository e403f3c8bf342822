/**
 * Vercel Sandbox adapter (reference/providers.md §3.2 "vercel"), speaking Vercel's REST API through `HttpClient`
 * with `Authorization: Bearer <token>` and `?teamId=` on every call when a team is configured. Wire facts are from
 * the reference and Vercel's SDK (@vercel/sandbox, its API client and validators).
 *
 * Sandboxes (`sandboxes.ts`): named `metal-<sandbox id>` and tagged with our ids. Create first asks for the named
 * sandbox (`GET /v2/sandboxes/{name}?projectId&resume=false`: a retry finds it), else `POST /v3/sandboxes {name,
 * projectId, persistent: false, runtime | image, resources: {vcpus}, timeout (ms), networkPolicy, env, tags}`
 * (the route and body Vercel's SDK 3.5 sends; a domain allow list is its `networkPolicy: {allow: [domains]}`);
 * a lost answer or a 409 is looked up by name, and the sandbox is polled until its session runs. Reconcile = the
 * name, checked against our tag. Destroy stops the session (`POST /v2/sandboxes/sessions/{id}/stop`), then
 * `DELETE /v2/sandboxes/{name}`; 404 is success. The lifetime is extended with `…/extend-timeout`.
 *
 * Sizing: 1–8 vCPUs, 2048 MB each (`resources.vcpus`: enough vCPUs for the requested vCPUs and memory); the
 * timeout is the runtime timeout plus five minutes (a safety net behind the gateway's timers), at most Vercel's 5 h.
 *
 * Commands and files go to the sandbox's session (`/v2/sandboxes/sessions/{id}/…`, the id kept at create):
 * `processes.ts` (cmd, NDJSON logs, `?wait=true`, kill) and `files.ts` (`fs/read`, `fs/write` as tar.gz with
 * `x-cwd: /`, `fs/mkdir`). Vercel's user works in `/vercel/sandbox` (and cannot create `/workspace`), so the
 * gateway's `/workspace` maps there (`withWorkspace`); the emulator keeps `/workspace`.
 *
 * Cost: `provider_metered` — the sandbox's metered active CPU, memory time and egress (from Vercel's records of
 * it) at Vercel's published prices: $0.128 per active-CPU hour, $0.0212 per GiB-hour (at least 60 s), $0.0000006
 * per create, $0.15 per GB of egress.
 *
 * Where the brief, the reference and Vercel's SDK differ, and what this adapter follows:
 * - Paths: the SDK's — create at `POST /v3/sandboxes` (the reference's `/v4` is not what Vercel's SDK sends, so it
 *   is neither called nor served), the named sandbox at
 *   `/v2/sandboxes/{name}`, and every runtime call under the session (`/v2/sandboxes/sessions/{session}/…`);
 *   there is no `/v4/sandboxes/{id}/cmd`. The SDK also reaches the API at `https://vercel.com/api`; the reference's
 *   `https://api.vercel.com` is the default here (VERCEL_API_URL changes it).
 * - The reference sends no vCPUs (its sizing is fixed); the SDK's `resources: {vcpus}` is sent here, so requests
 *   are sized as Vercel sizes them.
 * - Capabilities: the reference's row, plus cancel (`…/kill`, the SDK's `Command.kill`) and the internet switch
 *   (`networkPolicy: {mode: "deny-all"}`), both in the SDK; see `VERCEL_CAPABILITIES`.
 * - Kill sends SIGKILL (9), as the reference does on deadlines; the SDK defaults to SIGTERM.
 * - Idempotency is by name (the reference's `metal-<id>`), with our id also in `tags` (checked on reconcile).
 */
import { withWorkspace } from "../../core/workspace.ts"
import { makeProvider } from "../../core/makeProvider.ts"
import { makeEndpoints } from "./endpoints.ts"
import { makeFiles } from "./files.ts"
import { makeProcesses } from "./processes.ts"
import { makeSandboxes } from "./sandboxes.ts"
import { makeContext, NAME, type VercelProviderConfig } from "./wire.ts"

export { outputEvents } from "./processes.ts"
export { PROBE_SCRIPT } from "./files.ts"
export {
  DEFAULT_API_URL,
  executionIds,
  RATE_CARD,
  sandboxName,
  TAG_SANDBOX_ID,
  usageCostMicrousd,
  vcpusFor,
  VERCEL_CAPABILITIES,
  type VercelProviderConfig
} from "./wire.ts"

/** Where Vercel's sandbox user works (its home and every command's default directory). */
export const VERCEL_WORKSPACE = "/vercel/sandbox"

export const makeVercelProvider = makeProvider(NAME, {
  context: (config: VercelProviderConfig & { readonly workspaceDir?: string | undefined }) => makeContext(config),
  calls: (ctx, config) => {
    const { sessionOf, ...sandboxes } = makeSandboxes(ctx)
    const calls = { capabilities: ctx.capabilities, ...sandboxes, ...makeProcesses(ctx, sessionOf), ...makeFiles(ctx, sessionOf), ...makeEndpoints() }
    return withWorkspace(calls, config.workspaceDir ?? (config.mode === "emulated" ? "/workspace" : VERCEL_WORKSPACE))
  },
  // BYOK: the organization's token, project and (optional) team, against the same API.
  byok: (config) => (credentials) => ({ ...config, token: credentials["token"] ?? "", projectId: credentials["project_id"] ?? "", teamId: credentials["team_id"] })
})
