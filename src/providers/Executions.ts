/** Helpers every adapter that runs commands shares: buffered output as events, and the rules for followed executions. */
import type { ExecEvent } from "../runtime/LocalRuntime.ts"

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never
/** An event before it is numbered (an adapter collecting a followed execution's output). */
export type UnnumberedExecEvent = DistributiveOmit<ExecEvent, "seq">

/**
 * The events of a finished execution whose provider returns its output buffered (stdout and stderr apart, without
 * their order): stdout then stderr, cut at the output limit, then the exit — `outputTruncated` when this cut or the
 * provider's own did. A pure function of what the provider said, so every call numbers them the same.
 */
export const bufferedEvents = (
  output: { readonly stdout: string; readonly stderr: string },
  exit: { readonly exitCode: number | null; readonly signal: string | null; readonly cancelled?: boolean; readonly timedOut?: boolean },
  maxOutputBytes: number,
  truncatedAtProvider = false
): Array<ExecEvent> => {
  const events: Array<ExecEvent> = []
  let budget = maxOutputBytes
  let truncated = truncatedAtProvider
  for (const type of ["stdout", "stderr"] as const) {
    const bytes = new TextEncoder().encode(output[type])
    const data = bytes.subarray(0, Math.max(0, budget))
    if (data.length < bytes.length) truncated = true
    budget -= data.length
    if (data.length > 0) events.push({ seq: events.length, type, data })
  }
  events.push({ seq: events.length, type: "exit", exitCode: exit.exitCode, signal: exit.signal, cancelled: exit.cancelled ?? false, timedOut: exit.timedOut ?? false, outputTruncated: truncated })
  return events
}

/**
 * Executions an adapter follows over a live connection (E2B's process stream, Daytona's PTY socket): a lost
 * connection is re-attached at most this often, reported failing after this long, and a finished execution is
 * forgotten this long after its exit was seen.
 */
export const FOLLOWED_EXECUTIONS = { reattachBackoffMs: 1_000, reattachGiveUpMs: 5 * 60_000, forgetAfterMs: 10 * 60_000 } as const

/**
 * A followed execution's re-attach failed as unavailable: the next try waits `reattachBackoffMs`; true once it has
 * been failing for longer than `reattachGiveUpMs` (then the failure is the caller's answer).
 */
export const reattachFailed = (followed: { retryAt: number; failingSince: number | null }): boolean => {
  const now = Date.now()
  followed.failingSince ??= now
  followed.retryAt = now + FOLLOWED_EXECUTIONS.reattachBackoffMs
  return now - followed.failingSince > FOLLOWED_EXECUTIONS.reattachGiveUpMs
}
