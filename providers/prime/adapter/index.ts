/**
 * Prime Intellect sandboxes adapter (reference/providers.md §3.2 "prime"), speaking Prime's REST API through
 * `HttpClient` with `Authorization: Bearer <key>`, and each sandbox's gateway with the token `/auth` hands out.
 * Wire facts are from the reference and Prime's Python SDK (prime-sandboxes: its client, models and the
 * command_session proto).
 *
 * API (`apiUrl`, default https://api.primeintellect.ai; paths under `/api/v1`):
 * - `POST /sandbox {name: "metal-<sandbox id>", docker_image, cpu_cores, memory_gb, disk_size_gb, timeout_minutes,
 *   environment_vars, labels: ["metal-<hash of our id>"], idempotency_key: sha256(our id), vm: true, team_id?}`,
 *   then `GET /sandbox/{id}` every 500 ms until RUNNING (300 s at most). A lost answer is looked for by label.
 * - Reconcile: `GET /sandbox?labels=<label>&is_active=true&page&per_page[&team_id]`, matching the label.
 * - `DELETE /sandbox/{id}` destroys (404 is success). No pause or resume.
 * - Runtime: `POST /sandbox/{id}/auth` → `{gateway_url, user_ns, job_id, token}` before every call; then
 *   `<gateway_url>/<user_ns>/<job_id>/command_session.CommandSession/Start` (Connect, protobuf: `processes.ts`),
 *   `…/download` and multipart `…/upload` (`files.ts`).
 *
 * Sizing (`src/providers/resources.ts`, which eligibility uses too): 1–16 whole vCPUs, memory in 128 MiB steps up to 64 GiB
 * (sent as GB, a multiple of 0.125), disk 2–128 GiB (5 by default). Images: environments run `ubuntu:22.04`,
 * `node:22` or `python:3.11-slim`; OCI images must come from Docker Hub; templates must be `prime/…`. Refused
 * before any request: arm64, pause-on-timeout, pause, terminals, standard input, cancel, ports, file listing and
 * delete, parents and modes other than overwrite. Network policies cannot be asked of Prime here: the
 * capabilities say it cannot keep a sandbox off the internet, so only requests that allow internet are routed to
 * it. BYOK: `api_key` and `team_id`.
 *
 * Cost: `estimated_rate_card` — the sandbox's size over the window at 20,000 µUSD per vCPU-hour, 12,500 per
 * GiB-hour of memory and 200 per GiB-hour of disk (valid through 2026-12-22). Worked example: 2 vCPU, 4 GiB,
 * 5 GiB of disk for an hour = 91,000 µUSD.
 *
 * Where the reference, the brief and Prime's public SDK and API docs differ, and what this adapter follows:
 * - Paths: the SDK's client prefixes `/api/v1` (`/api/v1/sandbox`, `/api/v1/sandbox/{id}/auth`); the gateway
 *   base is `<gateway_url>/<user_ns>/<job_id>`, with `path` and `sandbox_id` as query parameters of
 *   download/upload.
 * - The SDK caches `/auth` tokens until `expires_at`; this adapter asks per call, as the reference does.
 * - Newer Prime APIs have network allow/deny lists, `arch: arm64`, paused sandboxes and checkpoints, exposed
 *   ports and SSH sessions; the reference refuses all of them and so does this adapter (capabilities as its row).
 * - The SDK sends commands as `/bin/bash -c <string>`; the adapter sends `exec <quoted argv>` as that string
 *   (the reference's form), so the exit code is the command's own.
 * - The SDK only runs Connect for some sandboxes (REST `/exec` for others); the reference and this adapter always
 *   use `CommandSession/Start`, with the protobuf codec through @bufbuild/protobuf (a schema in code, not the
 *   reference's hand-rolled bytes).
 * - Isolation is declared `vm` (create sends `vm: true`); the reference's row states none.
 * - The gateway's `/workspace` is passed to Prime unchanged: Prime's images may not have it (nothing creates it
 *   on a real sandbox yet); the emulator's sandboxes do.
 */
import { makeProvider } from "../../core/makeProvider.ts"
import { makeEndpoints } from "./endpoints.ts"
import { makeFiles } from "./files.ts"
import { makeProcesses } from "./processes.ts"
import { makeSandboxes } from "./sandboxes.ts"
import { makeContext, NAME, type PrimeProviderConfig } from "./wire.ts"

export { WHOLE_FILE_BYTES } from "./files.ts"
export { commandLine, shellQuote, signalOfStatus } from "./processes.ts"
export { isDockerHub } from "./sandboxes.ts"
export {
  DEFAULT_API_URL,
  ENVIRONMENT_IMAGES,
  idempotencyKey,
  PRIME_CAPABILITIES,
  type PrimeProviderConfig,
  RATE_CARD,
  RATE_CARD_HOURLY,
  sandboxLabel,
  sandboxName
} from "./wire.ts"

export const makePrimeProvider = makeProvider(NAME, {
  context: makeContext,
  calls: (ctx) => ({ capabilities: ctx.capabilities, ...makeSandboxes(ctx), ...makeProcesses(ctx), ...makeFiles(ctx), ...makeEndpoints() }),
  // BYOK: the organization's key and (optional) team, against the same API.
  byok: (config) => (credentials) => ({ ...config, apiKey: credentials["api_key"] ?? "", teamId: credentials["team_id"] })
})
