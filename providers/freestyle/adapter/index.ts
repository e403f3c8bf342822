/**
 * Freestyle adapter (reference/providers.md §3.2 "freestyle", issue 11), speaking Freestyle's VM API with plain
 * `HttpClient` calls and `Authorization: Bearer <key>`, on the routes and shapes Freestyle's own SDK (`freestyle`
 * 0.2.17 on npm, the current one; the older `freestyle-sandboxes` is not used) sends and reads (issue 25).
 *
 * API (`apiUrl`, default https://api.freestyle.sh; every path under `/v5`):
 * - `POST /v5/vms {slug, snapshotId, firewall, ttlSeconds | maxRunSeconds, idleTimeoutSeconds?, metadata}`: the
 *   slug is derived from our sandbox id only (`metal-<id>-<sha10>`), so a retry, a 409 or a lost answer finds the VM
 *   by it (`GET /v5/vms/{slug}`: a slug names a VM wherever an id does) instead of creating a second one. The
 *   firewall is the network: a VM gets nothing its rules do not allow, so a sandbox with internet gets one rule (all
 *   outbound traffic to `{public: true}`) and one without gets `{rules: []}` — hence the internet switch declared
 *   (`FREESTYLE_CAPABILITIES`). Metadata keys and values are at most 63 characters (the caller's longer ones are
 *   left out). `GET /v5/vms/{id}` is polled (200 ms) until `running`; then `POST …/resize {cpu, memory, storage}`
 *   (MiB) grows it when the request needs more than the base VM (Freestyle only resizes upward); a VM whose setup
 *   fails is deleted.
 * - `POST …/pause` and `POST …/start` are pause and resume (state-aware, each waited on; states `starting`,
 *   `running`, `pausing`, `paused`, `stopped`); `DELETE /v5/vms/{id}` destroys (404 is success); `PATCH
 *   /v5/vms/{id} {ttlSeconds}` moves the deletion deadline when the gateway's moves.
 * - The 202 rule: an answer 202 means the outcome is not known yet; it is resolved by looking (the slug, the state,
 *   the file), never by sending the call again (`sandboxes.ts`, `processes.ts`, `files.ts`). (Freestyle answers 202
 *   to clients that ask for background requests; the adapter does not, and still takes a 202 this way.)
 * - Commands: `POST …/exec-await` (`processes.ts`); files: `fs/stat|read|write|mkdir|dir|exists` and `DELETE
 *   fs/remove` (`files.ts`), writes carrying their sha256.
 * - Sizing (`src/providers/resources.ts` FREESTYLE_SIZING): whole vCPUs and GiB, never below the base VM (2 vCPU, 4 GiB, the
 *   16 GiB root filesystem), at most 32 vCPU / 64 GiB / 64 GiB. `provider_size` is the snapshot used.
 * - Snapshots: a `provider_template` source names one; else `provider_options.freestyle.snapshot_id`; else
 *   FREESTYLE_SNAPSHOT_ID (default `freestyle/ubuntu-sm`). OCI images and arm64 are refused (unsupported).
 * - Cost: an estimate at the rate card (40,320 µUSD per vCPU-hour, 12,900 per GiB-hour of memory, 86 per
 *   GiB-hour of storage; 2026-09-10), low confidence.
 *
 * No older route is kept: the reference's `name`, `?search=` lookups, `{vcpuCount, memSizeGb, rootfsSizeGb}`
 * resizes and `POST fs/remove` are what the SDK no longer sends, and neither the adapter nor the emulator uses them.
 * Env and cwd still travel in the `exec-await` shell line (its `env` field would do as well). The base 2 vCPU /
 * 4 GiB is the size the reference's cost example prices (133,616 µUSD for an hour) and is assumed where a VM does
 * not report its size.
 *
 * Paths: the gateway's `/workspace` is used as is (a Freestyle VM's user is root and can make it).
 */
import { makeProvider } from "../../core/makeProvider.ts"
import { makeEndpoints } from "./endpoints.ts"
import { makeFiles } from "./files.ts"
import { makeProcesses } from "./processes.ts"
import { makeSandboxes } from "./sandboxes.ts"
import { type FreestyleProviderConfig, makeContext, NAME } from "./wire.ts"

export { commandLine } from "./processes.ts"
export {
  DEFAULT_API_URL,
  DEFAULT_SNAPSHOT_ID,
  executionIds,
  FREESTYLE_CAPABILITIES,
  type FreestyleProviderConfig,
  MAX_EXEC_SECONDS,
  METADATA_SANDBOX_ID,
  RATE_CARD,
  vmSlug
} from "./wire.ts"

export const makeFreestyleProvider = makeProvider(NAME, {
  context: makeContext,
  calls: (ctx) => ({ capabilities: ctx.capabilities, ...makeSandboxes(ctx), ...makeProcesses(ctx), ...makeFiles(ctx), ...makeEndpoints() }),
  // BYOK: the organization's key, against the same API.
  byok: (config) => (credentials) => ({ ...config, apiKey: credentials["api_key"] ?? "" })
})
