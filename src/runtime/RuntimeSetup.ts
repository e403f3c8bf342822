/**
 * Preparing the host for the local runtime, once per runtime: root and the host's settings (Host.ts), the
 * sandboxes' directory, the blank disk images, the agent transpiled and its tools on the tools tmpfs, the DNS
 * forwarders' upstreams — all of it the RuntimeContext its parts share.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { agentModules } from "./agent/source.ts"
import { cgroupScope } from "./Cgroups.ts"
import { DEFAULT_DISK_MB, keepBlankImage } from "./Disk.ts"
import { parseUpstream } from "./DomainPolicy.ts"
import { dnsModules } from "./dns/source.ts"
import { hostResolvers } from "./Egress.ts"
import { collectTools, ensureTools, HostError, prepareHost, requireRoot, type Tools, TOOLS_REFRESH_MS } from "./Host.ts"
import { DEFAULT_HOST_UID, sandboxesDir } from "./Jail.ts"
import type { RuntimeContext } from "./RuntimeContext.ts"
import { type EgressPolicy, MAX_BASE } from "./UidLeases.ts"
import { POOL_DISK_MB } from "./WarmPool.ts"

/** The runtime's options that shape the host's preparation (LocalRuntimeLive.ts' LocalRuntimeOptions extends them). */
export interface RuntimeHostOptions {
  /** Base of the sandbox host uid ranges (default 1000000; RUNTIME_HOST_UID). */
  readonly hostUid?: number | undefined
  /** false: never use cgroups, even where writable (rlimits and SIGSTOP instead). */
  readonly cgroups?: boolean | undefined
  /** Sandboxes with internet may reach private ranges (RUNTIME_ALLOW_PRIVATE_EGRESS); never the host itself. */
  readonly allowPrivateEgress?: boolean | undefined
  /**
   * Resolvers the DNS forwarders of sandboxes with a domain policy ask (`ip`, `ip:port`, `[v6]:port`); default
   * the nameservers of the host's /etc/resolv.conf (RUNTIME_DNS_UPSTREAM).
   */
  readonly dnsUpstreams?: ReadonlyArray<string> | undefined
}

let toolsCollected = false

/**
 * The agent's modules as the jail runs them, and the host's DNS forwarder beside them: transpiled once, imports
 * (static and dynamic) pointing at the .js files beside them (the two sets' file names differ).
 */
const transpileAgent = (): Record<string, string> => {
  const transpiler = new Bun.Transpiler({ loader: "ts", target: "bun" })
  return Object.fromEntries(Object.entries({ ...agentModules, ...dnsModules }).map(([name, source]) => [
    name.replace(/\.ts$/, ".js"),
    transpiler.transformSync(source).replace(/((?:from\s*|import\(\s*)["']\.\/[\w-]+)\.ts(["'])/g, "$1.js$2")
  ]))
}

export const makeRuntimeContext = (dataDir: string, options: RuntimeHostOptions): RuntimeContext => {
  requireRoot()
  prepareHost()
  const base = options.hostUid ?? DEFAULT_HOST_UID
  if (!(Number.isSafeInteger(base) && base >= 1 && base <= MAX_BASE)) throw new HostError(`RUNTIME_HOST_UID must be an integer from 1 to ${MAX_BASE}`)
  const policy: EgressPolicy = options.allowPrivateEgress === true ? "private" : "strict"
  fs.mkdirSync(sandboxesDir(dataDir), { recursive: true, mode: 0o700 })
  fs.chmodSync(sandboxesDir(dataDir), 0o700)
  const scope = cgroupScope(dataDir)
  const useCgroups = options.cgroups !== false
  keepBlankImage(POOL_DISK_MB)
  keepBlankImage(DEFAULT_DISK_MB)
  // Transpiled once here; the tools tmpfs holds one copy per distinct agent.
  const agentFiles = transpileAgent()
  // A `bun build --compile` gateway is itself bun when run with BUN_BE_BUN=1.
  const bunPath = fs.realpathSync(process.execPath)
  const compiled = import.meta.url.includes("$bunfs") || !/^bun(\.exe)?$/.test(path.basename(bunPath))
  const agentEnv = { ...(compiled ? { BUN_BE_BUN: "1" } : {}), BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0" }
  let tools: Tools = ensureTools(bunPath, agentFiles)
  if (!toolsCollected) {
    toolsCollected = true
    collectTools(tools)
  }
  let toolsRefreshed = Date.now()
  /** The tool copies, put back if something removed them since, and marked in use now and then. */
  const currentTools = () => {
    if (!fs.existsSync(tools.bun) || !fs.existsSync(tools.agent) || (tools.rt !== null && !fs.existsSync(tools.rt)) || Date.now() - toolsRefreshed > TOOLS_REFRESH_MS) {
      tools = ensureTools(bunPath, agentFiles)
      toolsRefreshed = Date.now()
    }
    return tools
  }

  const dnsUpstreams = (options.dnsUpstreams ?? [...hostResolvers().v4, ...hostResolvers().v6]).map((text) => {
    const upstream = parseUpstream(text)
    if (upstream === undefined) throw new HostError(`RUNTIME_DNS_UPSTREAM: not an address (ip, ip:port or [ipv6]:port): ${text.slice(0, 100)}`)
    return upstream
  })
  const aborter = new AbortController()
  return {
    dataDir,
    base,
    policy,
    scope,
    useCgroups,
    blanksDir: path.join(dataDir, "disk-templates"),
    agentEnv,
    currentTools,
    aborter,
    dnsUpstreams
  }
}
