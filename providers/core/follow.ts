/**
 * Push for a quiet command (`execNews`) where the provider can follow one: a connection per execution a job waits
 * on (Daytona's log WebSocket, Blaxel's log stream) that says when there may be news — data it marks as news, and
 * its close (the command ended, or the connection broke). The job then polls `execEvents`, which stays what reads
 * the output. What a follow carries is counted, never kept, and bounded as a read of the output is: past `limit`
 * bytes the connection is closed and the command is polled as before, so a flooding sandbox costs no more reading
 * here.
 *
 * Without it a quiet command was polled four times a second, each poll one or more calls into the sandbox; with it,
 * a quiet command costs its connection.
 */
import { Effect } from "effect"
import { waitAsPoll } from "../../src/providers/Provider.ts"
import { News } from "./news.ts"

/** A follow nobody asked about for this long is closed (its job ended, or moved to another gateway). */
const UNASKED_MS = 30_000
/** Follows held at once; past it the oldest goes. */
const MAX_FOLLOWS = 512
/** After a follow that closed, the next one opens no sooner than this (a connection refused must not spin a job). */
const REOPEN_MS = 1_000

/** What a follow's connection reports. */
export interface FollowSink {
  /** `bytes` more arrived; `news`: they may be output `execEvents` would now give (a keep-alive is not). */
  readonly data: (bytes: number, news: boolean) => void
  /** The connection ended, whatever the reason. */
  readonly closed: () => void
}
/** Opens a follow's connection (it may throw: the address is refused outright); `close` ends it. */
export type OpenFollow = (sink: FollowSink) => { readonly close: () => void }

interface Follow {
  /** Ends the connection (a no-op until it is open). */
  close: () => void
  /** Told by data marked as news, and by the close. */
  readonly news: News
  /** Bytes carried so far. */
  bytes: number
  closed: boolean
  askedAt: number
}

export const makeFollows = () => {
  const follows = new Map<string, Follow>()
  /** When an execution whose follow closed may be followed again. */
  const reopenAt = new Map<string, number>()
  /** Executions whose output outgrew a follow: polled (least recently added first out). */
  const outgrown = new Set<string>()

  const forget = (executionId: string) => {
    const follow = follows.get(executionId)
    reopenAt.delete(executionId)
    outgrown.delete(executionId)
    if (follow === undefined) return
    follows.delete(executionId)
    follow.closed = true
    follow.close()
    follow.news.tell()
  }

  const start = (executionId: string, openFollow: OpenFollow, limit: number): Follow => {
    const now = Date.now()
    for (const [id, other] of follows) if (now - other.askedAt > UNASKED_MS) forget(id)
    for (const [id, at] of reopenAt) if (at < now) reopenAt.delete(id)
    if (follows.size >= MAX_FOLLOWS) forget(follows.keys().next().value!)
    const follow: Follow = { close: () => {}, news: new News(), bytes: 0, closed: false, askedAt: now }
    const connection = openFollow({
      data: (bytes, isNews) => {
        follow.bytes += bytes
        if (follow.bytes > limit && !follow.closed) {
          if (outgrown.size >= MAX_FOLLOWS) outgrown.delete(outgrown.values().next().value!)
          outgrown.add(executionId)
          follow.closed = true
          follow.close()
          follow.news.tell()
        } else if (isNews) follow.news.tell()
      },
      closed: () => {
        follow.closed = true
        follow.news.tell()
      }
    })
    follow.close = () => connection.close()
    // Outgrown while it opened: closed now that it can be.
    if (outgrown.has(executionId)) connection.close()
    follows.set(executionId, follow)
    return follow
  }

  const wait = (follow: Follow, maxMs: number) =>
    Effect.suspend(() => {
      follow.askedAt = Date.now()
      return follow.news.wait(maxMs)
    })

  /**
   * `execNews` for one execution: waits on its follow (opened with what `connect` gives, when there is none), or
   * as a poll would where it cannot be followed.
   */
  const execNews = (executionId: string, connect: Effect.Effect<OpenFollow, unknown>, limit: number, maxMs: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (outgrown.has(executionId)) {
        follows.delete(executionId)
        return waitAsPoll(maxMs)
      }
      const follow = follows.get(executionId)
      if (follow !== undefined && !follow.closed) return wait(follow, maxMs)
      if (follow !== undefined) {
        // Closed: the command ended or the connection broke. The close is news once; a later wait opens a new
        // connection, not at once.
        follows.delete(executionId)
        reopenAt.set(executionId, Date.now() + REOPEN_MS)
        if (follow.news.pending) return Effect.void
      }
      const after = reopenAt.get(executionId)
      if (after !== undefined && Date.now() < after) return Effect.sleep(Math.min(maxMs, after - Date.now()))
      reopenAt.delete(executionId)
      return Effect.flatMap(Effect.either(connect), (openFollow) => {
        // No address to follow (or a malformed one, below): polled, as without a follow.
        if (openFollow._tag === "Left") return waitAsPoll(maxMs)
        let follow: Follow
        try {
          follow = start(executionId, openFollow.right, limit)
        } catch {
          reopenAt.set(executionId, Date.now() + REOPEN_MS)
          return waitAsPoll(maxMs)
        }
        return wait(follow, maxMs)
      })
    })

  return { execNews, forget }
}
