/**
 * Freestyle adapter (reference/providers.md §3.2 "freestyle", issue 11), speaking Freestyle's VM API with plain
 * `HttpClient` calls (the reference's adapter used only the `freestyle` SDK's authenticated fetch, which is not on
 * npm) and `Authorization: Bearer <key>`.
 *
 * API (`apiUrl`, default https://api.freestyle.sh; every path under `/v5`):
 * - `POST /v5/vms {name, snapshotId, ports: [], waitForReadySignal, ttlSeconds | maxRunSeconds, idleTimeoutSeconds?,
 *   metadata}`: the name is derived from our sandbox id only (`metal-<id>-<sha10>`), so a retry, a 409 or a lost
 *   answer finds the VM by name (`GET /v5/vms?search=<name>`) instead of creating a second one. `GET
 *   /v5/vms/{id}` is polled (200 ms) until `running`; then `POST …/resize {vcpuCount, memSizeGb, rootfsSizeGb}`
 *   grows it when the request needs more than the base VM (Freestyle only resizes upward); a VM whose setup fails is
 *   deleted.
 * - `POST …/pause` and `POST …/start` are pause and resume (state-aware, each waited on); `DELETE /v5/vms/{id}`
 *   destroys (404 is success).
 * - The 202 rule: an answer 202 means the outcome is not known yet; it is resolved by looking (the name, the state,
 *   the file), never by sending the call again (`sandboxes.ts`, `processes.ts`, `files.ts`).
 * - Commands: `POST …/exec-await` (`processes.ts`); files: `fs/stat|read|write|mkdir|dir|exists|remove`
 *   (`files.ts`), writes carrying their sha256.
 * - Sizing (`core/resources.ts` FREESTYLE_SIZING): whole vCPUs and GiB, never below the base VM (2 vCPU, 4 GiB, the
 *   16 GiB root filesystem), at most 32 vCPU / 64 GiB / 64 GiB. `provider_size` is the snapshot used.
 * - Snapshots: a `provider_template` source names one; else `provider_options.freestyle.snapshot_id`; else
 *   FREESTYLE_SNAPSHOT_ID (default `freestyle/ubuntu-sm`). OCI images and arm64 are refused (unsupported).
 * - Cost: an estimate at the rate card (40,320 µUSD per vCPU-hour, 12,900 per GiB-hour of memory, 86 per
 *   GiB-hour of storage; 2026-09-10), low confidence.
 *
 * Where the reference, the brief and Freestyle's public docs differ, and what this adapter follows:
 * - Version and verbs: the public OpenAPI (and docs.freestyle.sh) document `/v1/vms` with `suspend`, `start`,
 *   `stop`, `kill`, `resize`, `exec-await` and `files/{path}` (JSON `{content, encoding}`); the `freestyle` SDK
 *   README says the current API lives under `/v5`. The reference's `/v5` paths, `pause`/`start` and `fs/*` routes
 *   (stat, ranged read, write with sha256, mkdir, dir, exists, remove) are followed, as the issue asks.
 * - `exec-await`: the public schema is `{command, terminal?, timeoutMs?}` → `{stdout, stderr, statusCode}`, and
 *   408 `ExecTimedOut`; the reference adds native env and stdin (base64, ≤ 1 MiB). Env and cwd go into the shell
 *   line (works with both), stdin as the reference sends it.
 * - Create fields: `name`, `snapshotId`, `ports`, `waitForReadySignal`, `idleTimeoutSeconds` are in the public
 *   schema; `ttlSeconds`, `maxRunSeconds` and `metadata` are the reference's. The reference also opens the firewall
 *   to the public internet; no firewall field is sent here, and no internet switch is claimed (`network: null`).
 * - Resize fields (`vcpuCount`, `memSizeGb`, `rootfsSizeGb`, upward only) and the 16 GiB default root filesystem
 *   are from the public docs; the base 2 vCPU / 4 GiB is the size the reference's cost example prices (133,616 µUSD
 *   for an hour) and is assumed where a VM does not report its size.
 *
 * Paths: the gateway's `/workspace` is used as is (a Freestyle VM's user is root and can make it).
 */
import type { SandboxProvider } from "../../core/Provider.ts"
import { makeEndpoints } from "./endpoints.ts"
import { makeFiles } from "./files.ts"
import { makeProcesses } from "./processes.ts"
import { makeSandboxes } from "./sandboxes.ts"
import { type FreestyleProviderConfig, makeContext, NAME } from "./wire.ts"

export { commandLine } from "./processes.ts"
export {
  decodeExecutionId,
  DEFAULT_API_URL,
  DEFAULT_SNAPSHOT_ID,
  encodeExecutionId,
  FREESTYLE_CAPABILITIES,
  type FreestyleProviderConfig,
  MAX_EXEC_SECONDS,
  METADATA_SANDBOX_ID,
  RATE_CARD,
  vmSlug
} from "./wire.ts"

export const makeFreestyleProvider = (config: FreestyleProviderConfig): SandboxProvider => {
  const ctx = makeContext(config)
  return {
    name: NAME,
    capabilities: ctx.capabilities,
    mode: config.mode,
    // BYOK: the organization's key, against the same API.
    withCredentials: (credentials) => makeFreestyleProvider({ ...config, apiKey: credentials["api_key"] ?? "" }),
    ...makeSandboxes(ctx),
    ...makeProcesses(ctx),
    ...makeFiles(ctx),
    ...makeEndpoints()
  }
}
