/**
 * What the runtime's parts share (JailLifecycle.ts, JailNetwork.ts, JailRemoval.ts, WarmPool.ts, Sweep.ts): where
 * jails live and how they are made.
 */
import type { Tools } from "./Host.ts"
import type { EgressPolicy } from "./UidLeases.ts"

/**
 * How long a jail (and its network, its DNS forwarder) may take to start. Usually tens of milliseconds; on a host
 * whose cores are saturated slirp4netns took more than 10 s to set its route up (a CI run's create failed), and a
 * slow start is better than a failed one. A start that fails (a process that exits) is not waited for.
 */
export const START_TIMEOUT_MS = 30_000
/** How much of bwrap's (or slirp4netns') stderr is kept for the operator's log while a jail starts. */
export const START_LOG_BYTES = 16 * 1024

export interface RuntimeContext {
  readonly dataDir: string
  /** Base of the sandbox uid ranges, and which sub-range (egress policy) this runtime leases from. */
  readonly base: number
  readonly policy: EgressPolicy
  /** This DATA_DIR's cgroup scope (Cgroups.ts), and whether cgroups are used at all. */
  readonly scope: string
  readonly useCgroups: boolean
  /** Blank disk images of the common sizes (Disk.ts createDisk). */
  readonly blanksDir: string
  /** Environment of the agent process (bun settings). */
  readonly agentEnv: Record<string, string>
  /** The tool copies on the tools tmpfs (put back if something removed them). */
  readonly currentTools: () => Tools
  /** Aborted when the runtime shuts down: pending agent calls end. */
  readonly aborter: AbortController
  /** Where the DNS forwarders of sandboxes with a domain policy send the names they allow (the host's resolvers). */
  readonly dnsUpstreams: ReadonlyArray<{ readonly host: string; readonly port: number }>
}
