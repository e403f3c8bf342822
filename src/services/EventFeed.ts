/**
 * The live event feed: notices events once they are committed — by this process, the CLI or another process on
 * the same database — by reading the event log's newest sequence number on the dialect's read connection
 * (src/db/EventTail.ts, microseconds a read): at once after each transaction of this process (Db.onCommit) and, on
 * PostgreSQL, whenever the tail's own reader learnt of events other replicas committed; and every 100 ms in any case
 * (on SQLite the commits of other processes: the CLI's). It wakes the runner when this process enqueued webhook
 * deliveries (committed with their events) or another process committed events, and signals the event streams
 * watching the projects concerned; each stream then reads what it has not sent from the log itself, so a missed
 * or coalesced signal never loses an event.
 */
import { Context, Effect, Layer, Queue, Runtime, type Scope } from "effect"
import { Db } from "../db/Db.ts"
import { eventTail } from "../db/EventTail.ts"
import { OperationRunner } from "./OperationRunner.ts"
import { notify as signal } from "./Signals.ts"
import { takeDeliveriesHint } from "./webhooks/FanOut.ts"
import type { ProjectId } from "../domain/Ids.ts"

/**
 * How often the log is read without a hint: on SQLite, the most a commit of another process (the CLI) waits to be
 * noticed. An idle gateway's wake-ups are its cost (at 20 ms, 18 ms of CPU a second measured), not the read's.
 */
export const FEED_POLL_MS = 100

export interface EventFeedShape {
  /** The newest committed event's sequence number. */
  readonly lastSeq: Effect.Effect<number>
  /**
   * Watches a project: the queue receives a signal (coalesced) whenever events of it were committed, and is
   * shut down when the feed stops. Released with the scope.
   */
  readonly watch: (projectId: ProjectId) => Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope>
}

export class EventFeed extends Context.Tag("app/EventFeed")<EventFeed, EventFeedShape>() {}

interface Watcher {
  readonly projectId: ProjectId
  readonly signal: Queue.Queue<void>
}

export const EventFeedLive = Layer.scoped(
  EventFeed,
  Effect.gen(function*() {
    const runner = yield* OperationRunner
    const db = yield* Db
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const tail = yield* eventTail
    // News another replica announced (a process's output, an operation's events): wakes this one's followers.
    tail.onSignal((topic) => Effect.runSync(signal(topic)))
    const watchers = new Set<Watcher>()
    let seen = tail.lastSeq()
    let open = true

    const notify = (from: number, upTo: number, wakeRunner: boolean) =>
      Effect.gen(function*() {
        if (wakeRunner) yield* runner.wake
        if (watchers.size === 0) return
        const projects = tail.projectsBetween(from, upTo)
        for (const watcher of watchers) {
          if (projects.has(watcher.projectId)) yield* Queue.offer(watcher.signal, undefined)
        }
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("event feed notification failed", cause)))

    /**
     * Plain JavaScript, not a fiber: it runs 50 times a second on an idle server, and a read of the newest sequence
     * number costs microseconds where a fiber's turn would cost far more.
     */
    const check = (ownCommit: boolean) => {
      if (!open) return
      let last: number
      try {
        last = tail.lastSeq()
      } catch {
        return
      }
      // The runner is woken for deliveries this process enqueued, and for any news from another process (whose
      // events may have deliveries this runner should send).
      const wakeRunner = takeDeliveriesHint() || (!ownCommit && last > seen)
      if (last <= seen) {
        if (wakeRunner) runFork(runner.wake)
        return
      }
      const from = seen
      seen = last
      if (wakeRunner || watchers.size > 0) runFork(notify(from, last, wakeRunner))
    }

    const timer = setInterval(() => check(false), FEED_POLL_MS)
    tail.onAdvance(() => check(false))
    const forget = yield* db.onCommit(() => check(true))
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        open = false
        clearInterval(timer)
        yield* forget
        yield* Effect.forEach(watchers, (w) => Queue.shutdown(w.signal), { discard: true })
      })
    )

    return {
      lastSeq: Effect.sync(() => tail.lastSeq()),
      watch: (projectId) =>
        Effect.acquireRelease(
          Effect.map(Queue.sliding<void>(1), (signal) => {
            watchers.add({ projectId, signal })
            return signal
          }),
          (signal) =>
            Effect.zipRight(
              Effect.sync(() => {
                for (const w of watchers) if (w.signal === signal) watchers.delete(w)
              }),
              Queue.shutdown(signal)
            )
        )
    }
  })
)
