/**
 * The exchanges open through endpoints right now (in memory: they live and die with this process), so that a
 * lease that ends cuts them at once, not when the sandbox's server happens to finish (ARCHITECTURE.md §5).
 *
 * - Expiry: each exchange has a timer at its endpoint's `lease_expires_at`.
 * - Everything else that stops an endpoint — revoke (the route, its job), the sandbox pausing, stopping or being
 *   deleted (by the user, a timeout, the spend limit, provider loss) — changes rows in the database. While any
 *   exchange is open, a watchdog re-reads those rows every WATCH_MS and cuts the exchanges of every endpoint that
 *   may no longer serve, whichever code path (or process) changed it; while none is, it sleeps. `recheck` runs it
 *   at once (after a revoke).
 *
 * Cutting aborts the exchange's signal: the request to the sandbox is aborted and the client's response errors
 * out (its connection is closed), whether headers were sent already or not.
 */
import { Context, Duration, Effect, Layer } from "effect"
import { type EndpointAccessRow, EndpointsRepo } from "../../db/repos/Endpoints.ts"
import type { EndpointId } from "../../domain/Ids.ts"

/** How often open exchanges are checked against the database. */
export const WATCH_MS = 250
/** setTimeout's limit (about 24.8 days); leases are at most a day. */
const MAX_TIMER_MS = 2 ** 31 - 1

export type CutReason = "revoked" | "expired" | "sandbox_unavailable"

/** Why an endpoint may not serve now, or undefined when it may. */
export const refusal = (row: Pick<EndpointAccessRow, "state" | "lease_expires_at" | "sandbox_state" | "provider_url">, now = Date.now()): CutReason | undefined => {
  if (row.state !== "active" || row.provider_url === null) return "revoked"
  if (Date.parse(row.lease_expires_at) <= now) return "expired"
  if (row.sandbox_state !== "ready") return "sandbox_unavailable"
  return undefined
}

export interface OpenExchange {
  /** Aborted when the exchange is cut. */
  readonly signal: AbortSignal
  /** Why it was cut, once it was. */
  readonly cutReason: () => CutReason | undefined
  /** The exchange ended (finished, failed or cut): forget it. Idempotent. */
  readonly close: () => void
}

export interface EndpointConnectionsShape {
  readonly open: (endpoint: { readonly id: EndpointId; readonly leaseExpiresAt: string }) => OpenExchange
  /** Re-reads every endpoint with open exchanges now and cuts those that may no longer serve. */
  readonly recheck: Effect.Effect<void>
  /** Open exchanges (of one endpoint, or all). */
  readonly count: (endpointId?: EndpointId) => number
}

export class EndpointConnections extends Context.Tag("app/EndpointConnections")<EndpointConnections, EndpointConnectionsShape>() {}

interface Entry {
  readonly controller: AbortController
  timer: ReturnType<typeof setTimeout> | undefined
  reason: CutReason | undefined
}

export const makeEndpointConnections = Effect.gen(function*() {
  const endpoints = yield* EndpointsRepo
  const open = new Map<EndpointId, Set<Entry>>()
  /** Open while any exchange is: the watchdog waits on it. */
  const anyOpen = yield* Effect.makeLatch(false)

  const cut = (entry: Entry, reason: CutReason) => {
    if (entry.reason !== undefined) return
    entry.reason = reason
    clearTimeout(entry.timer)
    entry.controller.abort(reason)
  }

  const shape: EndpointConnectionsShape = {
    open: (endpoint) => {
      const entry: Entry = { controller: new AbortController(), timer: undefined, reason: undefined }
      const ms = Date.parse(endpoint.leaseExpiresAt) - Date.now()
      entry.timer = setTimeout(() => cut(entry, "expired"), Math.min(Math.max(0, ms), MAX_TIMER_MS))
      let set = open.get(endpoint.id)
      if (set === undefined) open.set(endpoint.id, set = new Set())
      set.add(entry)
      anyOpen.unsafeOpen()
      return {
        signal: entry.controller.signal,
        cutReason: () => entry.reason,
        close: () => {
          clearTimeout(entry.timer)
          const current = open.get(endpoint.id)
          if (current === undefined) return
          current.delete(entry)
          if (current.size === 0) open.delete(endpoint.id)
        }
      }
    },
    recheck: Effect.suspend(() => {
      if (open.size === 0) return Effect.void
      return Effect.map(endpoints.accessOf([...open.keys()]), (rows) => {
        const byId = new Map(rows.map((row) => [row.id, row]))
        const now = Date.now()
        for (const [id, entries] of open) {
          const row = byId.get(id)
          const reason = row === undefined ? "revoked" : refusal(row, now)
          if (reason !== undefined) for (const entry of entries) cut(entry, reason)
        }
      })
    }),
    count: (endpointId) =>
      endpointId === undefined ? [...open.values()].reduce((n, set) => n + set.size, 0) : open.get(endpointId)?.size ?? 0
  }

  // Asleep while nothing is open: a turn four times a second for nothing was a quarter of an idle server's CPU.
  const untilAnyOpen = Effect.suspend(() => {
    if (open.size === 0) anyOpen.unsafeClose()
    return anyOpen.await
  })
  yield* Effect.zipRight(untilAnyOpen, shape.recheck).pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("endpoint watchdog failed", cause)),
    Effect.zipRight(Effect.sleep(Duration.millis(WATCH_MS))),
    Effect.forever,
    Effect.forkScoped
  )
  // Shutting down: nothing is served any more.
  yield* Effect.addFinalizer(() => Effect.sync(() => {
    for (const entries of open.values()) for (const entry of entries) cut(entry, "sandbox_unavailable")
  }))
  return shape
})

export const EndpointConnectionsLive = Layer.scoped(EndpointConnections, makeEndpointConnections)
