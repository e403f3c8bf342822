/**
 * The streams held open right now for a credential (ARCHITECTURE.md §6), so that revoking or expiring it — or
 * taking away its access — ends them, not only the requests that come after: `?follow=true` event streams, the
 * project event stream and terminal attaches register here with the credential that opened them (in memory:
 * they live and die with this process).
 *
 * A stream may no longer be served once its API key or user token is revoked, deleted or expired, its project
 * or organization is deleted, or (user tokens) its user is no longer a member of the project's organization. Every
 * stream the gateway holds open needs only membership, so no role change ends one.
 *
 * While any stream is open a watchdog re-reads those rows in one batch per credential kind, at once when
 * `accessChanged` is published (by the routes that revoke or delete, on this replica or — through Signals.publish
 * and Db.announce — on another one on the same PostgreSQL database), and every WATCH_MS in any case: the backstop
 * for expiry, for the CLI (`tokens revoke`, another process: on SQLite nothing announces it) and for a missed
 * signal. Ending aborts the stream's signal; each kind of stream then closes in its own protocol's way (src/http/
 * Sse.ts `whileAllowed`, src/http/Attach.ts).
 */
import { Context, Effect, Layer, Schema } from "effect"
import { OrganizationsRepo } from "../db/repos/Organizations.ts"
import { ProjectsRepo } from "../db/repos/Projects.ts"
import { UsersRepo } from "../db/repos/Users.ts"
import { ApiKeyId, ProjectId, UserId } from "../domain/Ids.ts"
import type { KeyPrincipal, UserPrincipal } from "../domain/Principals.ts"
import { nextSignal, publish } from "./Signals.ts"

/** How often open streams are checked against the database without a signal (the most an expiry waits). */
export const WATCH_MS = 1_000

/** The topic `accessChanged` publishes: a credential was revoked, a member removed, a project or organization deleted. */
export const ACCESS_TOPIC = "access"

/** Who opened a stream: the credential, and the project the stream is about. */
export const StreamHolder = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("api_key"), keyId: ApiKeyId, projectId: ProjectId }),
  Schema.Struct({ kind: Schema.Literal("user_token"), tokenId: Schema.String, userId: UserId, projectId: ProjectId })
)
export type StreamHolder = typeof StreamHolder.Type

export const keyHolder = (key: KeyPrincipal): StreamHolder => ({ kind: "api_key", keyId: key.keyId, projectId: key.projectId })
export const userHolder = (user: UserPrincipal, projectId: ProjectId): StreamHolder => ({ kind: "user_token", tokenId: user.tokenId, userId: user.userId, projectId })

export type EndReason = "credential_revoked" | "credential_expired" | "access_removed"

/** What a client is told when its stream ends for `reason` (the error frame's envelope; short: a WebSocket close's reason). */
export const END_REASONS: Record<EndReason, { readonly code: "unauthenticated" | "forbidden"; readonly message: string; readonly short: string }> = {
  credential_revoked: { code: "unauthenticated", message: "The credential that opened this stream was revoked", short: "credential revoked" },
  credential_expired: { code: "unauthenticated", message: "The credential that opened this stream expired", short: "credential expired" },
  access_removed: {
    code: "forbidden",
    message: "The credential that opened this stream no longer has access to its project (membership removed, or the project or organization deleted)",
    short: "access removed"
  }
}

export interface HeldStream {
  /** Aborted when the stream must end. */
  readonly signal: AbortSignal
  /** Why it must end, once it must. */
  readonly endReason: () => EndReason | undefined
  /** The stream ended (for whatever reason): forget it. Idempotent. */
  readonly close: () => void
}

export interface LiveStreamsShape {
  /** Registers a stream `holder` opened, until its `close`. */
  readonly open: (holder: StreamHolder) => HeldStream
}

export class LiveStreams extends Context.Tag("app/LiveStreams")<LiveStreams, LiveStreamsShape>() {}

/**
 * Wakes the watchdog of every replica (after the change committed: a watchdog that read before the commit
 * would find the credential still live). Never fails the route that changed access: the backstop covers a
 * signal that could not be sent.
 */
export const accessChanged = publish(ACCESS_TOPIC).pipe(
  Effect.catchAllCause((cause) => Effect.logWarning("could not announce an access change; open streams are re-checked within a second", cause))
)

interface Entry {
  readonly holder: StreamHolder
  readonly controller: AbortController
  reason: EndReason | undefined
}

/** Why a stream of this credential (undefined: it no longer exists) must end, or undefined when it may go on. */
const refusal = <C extends { readonly revoked_at: string | null; readonly expires_at: string | null }>(
  credential: C | undefined,
  now: number,
  hasAccess: (credential: C) => boolean
): EndReason | undefined => {
  if (credential === undefined || credential.revoked_at !== null) return "credential_revoked"
  if (credential.expires_at !== null && Date.parse(credential.expires_at) <= now) return "credential_expired"
  return hasAccess(credential) ? undefined : "access_removed"
}

export const makeLiveStreams = Effect.gen(function*() {
  const projects = yield* ProjectsRepo
  const users = yield* UsersRepo
  const organizations = yield* OrganizationsRepo
  const open = new Set<Entry>()
  /** Open while any stream is: the watchdog waits on it. */
  const anyOpen = yield* Effect.makeLatch(false)

  const end = (entry: Entry, reason: EndReason) => {
    if (entry.reason !== undefined) return
    entry.reason = reason
    open.delete(entry)
    entry.controller.abort(reason)
  }

  /** Re-reads the credentials of every open stream and ends those that may no longer be served. */
  const recheck = Effect.suspend(() => {
    if (open.size === 0) return Effect.void
    const entries = [...open]
    const keyIds = new Set<ApiKeyId>()
    const tokenIds = new Set<string>()
    const userIds = new Set<string>()
    const userProjects = new Set<string>()
    for (const { holder } of entries) {
      if (holder.kind === "api_key") keyIds.add(holder.keyId)
      else {
        tokenIds.add(holder.tokenId)
        userIds.add(holder.userId)
        userProjects.add(holder.projectId)
      }
    }
    return Effect.gen(function*() {
      const keys = new Map((yield* projects.apiKeyStates([...keyIds])).map((row) => [row.id, row]))
      const tokens = new Map((yield* users.tokenStates([...tokenIds])).map((row) => [row.id, row]))
      const members = new Set((yield* organizations.projectMembers([...userProjects], [...userIds])).map((row) => `${row.project_id} ${row.user_id}`))
      const now = Date.now()
      for (const entry of entries) {
        const { holder } = entry
        const reason = holder.kind === "api_key"
          ? refusal(keys.get(holder.keyId), now, (key) => key.gone_at === null)
          : refusal(tokens.get(holder.tokenId), now, () => members.has(`${holder.projectId} ${holder.userId}`))
        if (reason !== undefined) end(entry, reason)
      }
    })
  })

  const shape: LiveStreamsShape = {
    open: (holder) => {
      const entry: Entry = { holder, controller: new AbortController(), reason: undefined }
      open.add(entry)
      anyOpen.unsafeOpen()
      return { signal: entry.controller.signal, endReason: () => entry.reason, close: () => void open.delete(entry) }
    }
  }

  // Checked, then asleep until an access change is announced or WATCH_MS has passed; while no stream is open, until
  // one is (a turn a second for nothing costs an idle server CPU).
  const untilAnyOpen = Effect.suspend(() => {
    if (open.size === 0) anyOpen.unsafeClose()
    return anyOpen.await
  })
  yield* Effect.forkScoped(Effect.forever(Effect.zipRight(
    Effect.zipRight(untilAnyOpen, recheck).pipe(Effect.catchAllCause((cause) => Effect.logWarning("live stream watchdog failed", cause))),
    nextSignal(ACCESS_TOPIC, WATCH_MS)
  )))
  return shape
})

export const LiveStreamsLive = Layer.scoped(LiveStreams, makeLiveStreams)
