/**
 * The E2B emulator's control API (`X-API-Key`, JSON errors `{code, message}`), the routes E2B's SDK (`e2b` 2.x)
 * calls: `POST /v2/sandboxes` (create), `GET /v2/sandboxes` (metadata, state, template and start filters, order,
 * `limit`/`nextToken` pages), `GET|DELETE /sandboxes/{id}`, `POST /sandboxes/{id}/pause`,
 * `POST /v2/sandboxes/{id}/connect` (resumes a paused sandbox, only ever extends the lifetime) and
 * `POST /sandboxes/{id}/timeout`. E2B's deprecated v1 routes (`POST|GET /sandboxes`, `…/resume`, `…/connect`) are
 * not served: neither the SDK nor the adapter calls them. Routes of E2B's API this emulator does not serve (fork,
 * snapshots, network updates, logs, metrics, templates, volumes) answer 501 naming themselves.
 *
 * Unknown body fields are ignored, as E2B's API ignores them; fields it has but this emulator cannot honour are
 * refused with a 400 that says so (`UNHONOURED`). The timeout is honoured: a running sandbox past its end is killed
 * (or paused, with `autoPause`); a paused one does not age.
 */
import { Option } from "effect"
import * as crypto from "node:crypto"
import { checkPolicy } from "../../../src/runtime/DomainPolicy.ts"
import { defaultInternetOf, type RuntimeDomainPolicy } from "../../../src/runtime/LocalRuntime.ts"
import { makeRouter, route, runOrThrow, unhonouredField } from "../../core/emulator/server.ts"
import { jailLabels } from "../../../src/providers/jailLabels.ts"
import { METADATA_SANDBOX_ID } from "../adapter/wire.ts"
import type { Books, EmulatedSandbox } from "./books.ts"
import { apiError, ENVD_VERSION, HttpFailure, isStringRecord, json, readJson, readOptionalJson, timeoutField } from "./http.ts"
import { sweepEvery } from "../../core/emulator/state.ts"

const SWEEP_MS = 1_000
/** The v2 routes' default lifetime (seconds) when a create or connect names none. */
const DEFAULT_TIMEOUT_SECONDS = 300

/** Fields of E2B's create request this emulator cannot honour: refused, never silently ignored. */
const UNHONOURED: Readonly<Record<string, string>> = {
  mcp: "the MCP gateway is not served by this emulator",
  volumeMounts: "volumes are not served by this emulator",
  iam: "workload identity tokens are not served by this emulator"
}
/** E2B's routes this emulator does not serve: a 501 that names them (any other path is E2B's 404). */
const NOT_SERVED = [
  /^\/sandboxes\/[^/]+\/(fork|snapshots|network|logs|metrics|refreshes)$/,
  /^\/v2\/sandboxes\/[^/]+\/logs$/,
  /^\/(v\d+\/)?(templates|snapshots|volumes|secrets|teams)(\/|$)/
]

const wireSandbox = (s: EmulatedSandbox) => ({
  templateID: s.templateID,
  sandboxID: s.sandboxID,
  clientID: "emulated",
  envdVersion: ENVD_VERSION,
  envdAccessToken: s.accessToken,
  trafficAccessToken: null,
  domain: null
})
const wireListed = (s: EmulatedSandbox) => ({
  templateID: s.templateID,
  sandboxID: s.sandboxID,
  clientID: "emulated",
  startedAt: s.startedAt,
  endAt: s.endAt,
  cpuCount: s.cpuCount,
  memoryMB: s.memoryMB,
  diskSizeMB: s.diskSizeMB,
  metadata: s.metadata,
  state: s.state,
  envdVersion: ENVD_VERSION
})
const wireDetail = (s: EmulatedSandbox) => ({
  ...wireListed(s),
  envdAccessToken: s.accessToken,
  allowInternetAccess: s.allowInternetAccess,
  domain: null,
  lifecycle: { autoResume: false, onTimeout: s.autoPause ? "pause" : "kill" }
})
const noContent = () => new Response(null, { status: 204 })

interface Call {
  readonly request: Request
  readonly url: URL
}

export const makeControl = (books: Books) => {
  const { runtime, sandboxes, save } = books

  /** Running sandboxes past their end are killed (or paused with autoPause); paused ones wait. */
  const sweeper = sweepEvery(SWEEP_MS, async (now) => {
    for (const s of Object.values(sandboxes)) {
      if (s.state !== "running" || Date.parse(s.endAt) > now) continue
      await (s.autoPause ? books.pause(s) : books.kill(s)).catch(() => undefined)
    }
  }, { atOnce: true })

  const sandboxOr404 = (id: string) => {
    const s = sandboxes[id]
    if (s === undefined) throw new HttpFailure(404, `sandbox "${id}" doesn't exist or you don't have access to it`)
    return s
  }

  /**
   * `allow_internet_access` and `network {allowOut, denyOut}` as E2B documents them, in the subset the runtime
   * enforces: `denyOut: ["0.0.0.0/0"]` alone (no internet), or with `allowOut` domain names (only those names).
   * IP and CIDR entries, and any other deny list, are refused rather than ignored.
   */
  const networkOf = (body: Record<string, unknown>): { internet: boolean; domains?: RuntimeDomainPolicy } => {
    const network = body["network"]
    // Left out: E2B's default (internet on), as the local runtime gives it.
    const allowed = body["allow_internet_access"] === undefined ? defaultInternetOf(runtime) : body["allow_internet_access"] !== false
    if (network === undefined) return { internet: allowed }
    if (typeof network !== "object" || network === null || Array.isArray(network)) throw new HttpFailure(400, "network must be an object")
    const { allowOut, denyOut } = network as { allowOut?: unknown; denyOut?: unknown }
    const refused = unhonouredField(network, {
      rules: "per-domain request transforms are not served by this emulator",
      egressProxy: "an egress proxy is not served by this emulator"
    })
    if (refused !== undefined) throw new HttpFailure(400, `network.${refused}`)
    const list = (v: unknown, field: string): Array<string> => {
      if (v === undefined) return []
      if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) throw new HttpFailure(400, `network.${field} must be a list of strings`)
      return v as Array<string>
    }
    const allow = list(allowOut, "allowOut")
    const deny = list(denyOut, "denyOut")
    if (deny.length === 0 && allow.length === 0) return { internet: allowed }
    if (deny.length !== 1 || deny[0] !== "0.0.0.0/0") throw new HttpFailure(400, "this emulator enforces network.denyOut only as [\"0.0.0.0/0\"] (with allowOut domain names)")
    if (allow.length === 0) return { internet: false }
    const domains: RuntimeDomainPolicy = { mode: "allow", domains: allow }
    const problem = checkPolicy(domains)
    if (problem !== null) throw new HttpFailure(400, `network.allowOut: this emulator enforces domain names only (${problem})`)
    return { internet: true, domains }
  }

  const create = async ({ request }: Call) => {
    const body = await readJson(request)
    const refused = unhonouredField(body, UNHONOURED)
    if (refused !== undefined) throw new HttpFailure(400, refused)
    if (body["autoPauseMemory"] === false) throw new HttpFailure(400, "autoPauseMemory: a filesystem-only pause is not served by this emulator (its pause keeps memory)")
    if ((body["autoResume"] as { enabled?: unknown } | null | undefined)?.enabled === true) throw new HttpFailure(400, "autoResume: resuming on traffic is not served by this emulator")
    const templateID = body["templateID"]
    if (typeof templateID !== "string" || !/^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$/.test(templateID)) {
      throw new HttpFailure(400, "templateID is required (a template id or alias)")
    }
    const timeout = timeoutField(body, false, DEFAULT_TIMEOUT_SECONDS)
    for (const field of ["metadata", "envVars"] as const) {
      if (body[field] !== undefined && !isStringRecord(body[field])) throw new HttpFailure(400, `${field} must map strings to strings`)
    }
    for (const field of ["autoPause", "allow_internet_access"] as const) {
      if (body[field] !== undefined && typeof body[field] !== "boolean") throw new HttpFailure(400, `${field} must be a boolean`)
    }
    const sandboxID = `i${Array.from(crypto.randomBytes(19), (b) => "abcdefghijklmnopqrstuvwxyz0123456789"[b % 36]).join("")}`
    const { internet, domains } = networkOf(body)
    const created = await runOrThrow(runtime.create({
      id: sandboxID,
      vcpu: 2,
      memoryMb: 512,
      internet,
      ...(domains !== undefined ? { domains } : {}),
      env: (body["envVars"] as Record<string, string> | undefined) ?? {},
      labels: jailLabels("e2b", sandboxID, (body["metadata"] as Record<string, string> | undefined)?.[METADATA_SANDBOX_ID])
    }))
    const now = Date.now()
    const sandbox: EmulatedSandbox = {
      sandboxID,
      templateID,
      metadata: (body["metadata"] as Record<string, string> | undefined) ?? {},
      state: "running",
      autoPause: body["autoPause"] === true,
      allowInternetAccess: internet,
      cpuCount: created.applied.vcpu,
      memoryMB: created.applied.memoryMb,
      diskSizeMB: created.applied.diskMb,
      accessToken: crypto.randomBytes(24).toString("base64url"),
      startedAt: new Date(now).toISOString(),
      endAt: new Date(now + timeout * 1000).toISOString(),
      processes: {}
    }
    sandboxes[sandboxID] = sandbox
    save()
    return json(wireSandbox(sandbox), 201)
  }

  /** `GET /v2/sandboxes`: the filters E2B's SDK sends (arrays as `a,b`: its client does not explode them). */
  const list = (url: URL) => {
    const params = url.searchParams
    const wanted = [...new URLSearchParams(params.get("metadata") ?? "")]
    const stateParams = params.getAll("state").flatMap((v) => v.split(",")).filter((x) => x !== "")
    const states = stateParams.length === 0 ? ["running", "paused"] : stateParams
    if (states.some((x) => x !== "running" && x !== "paused")) throw new HttpFailure(400, "state must be running or paused")
    const limit = Number(params.get("limit") ?? "100")
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new HttpFailure(400, "limit must be between 1 and 100")
    const from = Number(params.get("nextToken") ?? "0")
    if (!Number.isInteger(from) || from < 0) throw new HttpFailure(400, "nextToken is not valid")
    const order = params.get("order") ?? "desc"
    if (order !== "asc" && order !== "desc") throw new HttpFailure(400, "order must be asc or desc")
    const startedAfter = params.get("startedAfter")
    const after = startedAfter === null ? null : Date.parse(startedAfter)
    if (after !== null && Number.isNaN(after)) throw new HttpFailure(400, "startedAfter must be a date-time")
    const template = params.get("template")
    const matching = Object.values(sandboxes)
      .filter((s) =>
        states.includes(s.state) &&
        wanted.every(([k, value]) => s.metadata[k] === value) &&
        (after === null || Date.parse(s.startedAt) >= after) &&
        (template === null || template === "" || s.templateID === template)
      )
      .sort((a, b) => (order === "asc" ? a.startedAt.localeCompare(b.startedAt) : b.startedAt.localeCompare(a.startedAt)))
    const page = matching.slice(from, from + limit)
    const more = from + limit < matching.length
    return json(page.map(wireListed), 200, more ? { "x-next-token": String(from + limit) } : {})
  }

  const get = async (sandbox: EmulatedSandbox) => {
    // A sandbox whose machine died is gone at E2B: it is removed, and reads as not found.
    const jail = await runOrThrow(runtime.get(sandbox.sandboxID)).catch(() => Option.none())
    if (Option.isNone(jail) || jail.value.state === "stopped") {
      await books.kill(sandbox)
      return apiError(404, `sandbox "${sandbox.sandboxID}" doesn't exist or you don't have access to it`)
    }
    return json(wireDetail(sandbox))
  }

  const router = makeRouter<Call>([
    route("POST", "/v2/sandboxes", create),
    route("GET", "/v2/sandboxes", ({ url }) => list(url)),
    route("GET", "/sandboxes/:id", (_, { id }) => get(sandboxOr404(id!))),
    route("DELETE", "/sandboxes/:id", async (_, { id }) => {
      await books.kill(sandboxOr404(id!))
      return noContent()
    }),
    route("POST", "/sandboxes/:id/pause", async ({ request }, { id }) => {
      const sandbox = sandboxOr404(id!)
      if ((await readOptionalJson(request))["memory"] === false) {
        throw new HttpFailure(400, "memory: a filesystem-only pause is not served by this emulator (its pause keeps memory)")
      }
      if (sandbox.state === "paused") return apiError(409, `Sandbox ${sandbox.sandboxID} is already paused`)
      await books.pause(sandbox)
      return noContent()
    }),
    route("POST", "/v2/sandboxes/:id/connect", async ({ request }, { id }) => {
      const sandbox = sandboxOr404(id!)
      const body = await readOptionalJson(request)
      const timeout = timeoutField(body, false, DEFAULT_TIMEOUT_SECONDS)
      if (sandbox.state === "paused") {
        // E2B refuses a disk-only resume where the capability is not enabled, never downgrading it silently.
        if (body["memory"] === false) throw new HttpFailure(400, "memory: resuming from disk state only is not enabled in this environment")
        await books.resume(sandbox, timeout)
        return json(wireSandbox(sandbox), 201)
      }
      // Connecting only ever extends the lifetime.
      const end = Date.now() + timeout * 1000
      if (end > Date.parse(sandbox.endAt)) sandbox.endAt = new Date(end).toISOString()
      save()
      return json(wireSandbox(sandbox), 200)
    }),
    route("POST", "/sandboxes/:id/timeout", async ({ request }, { id }) => {
      const sandbox = sandboxOr404(id!)
      sandbox.endAt = new Date(Date.now() + timeoutField(await readJson(request), true, 0) * 1000).toISOString()
      save()
      return noContent()
    })
  ])

  const control = async (request: Request, url: URL): Promise<Response> => {
    if (request.headers.get("x-api-key") !== books.apiKey) return apiError(401, "Invalid API key")
    const found = router.match(request.method, url.pathname)
    if (found._tag === "Found") return found.handle({ request, url })
    if (NOT_SERVED.some((pattern) => pattern.test(url.pathname))) return apiError(501, `${request.method} ${url.pathname} is not served by this emulator`)
    return apiError(404, "Not found")
  }

  return { control, stop: () => sweeper.stop() }
}
