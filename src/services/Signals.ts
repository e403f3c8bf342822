/**
 * Wakes the readers that follow a stream of stored events (a process's output, an operation's events) as soon as
 * this process stores more. A hint only, kept in memory: a follower also looks again on its own every so often
 * (another process may be the writer). Notified inside the writer's transaction: a woken reader's query runs on
 * the same connection, after the commit.
 */
import { Effect } from "effect"
import { globalValue } from "effect/GlobalValue"
import { Db } from "../db/Db.ts"
import type { OperationId, ProcessId } from "../domain/Ids.ts"

const waiting = globalValue("app/Signals", () => new Map<string, Set<() => void>>())

export const processTopic = (processId: ProcessId) => `process:${processId}`
export const operationTopic = (operationId: OperationId) => `operation:${operationId}`

/** Wakes everyone waiting on `topic`. */
export const notify = (topic: string) =>
  Effect.sync(() => {
    const wakers = waiting.get(topic)
    if (wakers === undefined) return
    waiting.delete(topic)
    for (const wake of wakers) wake()
  })

/**
 * `notify`, and the same news for the other replicas on the database (Db.announce: delivered at commit; each
 * replica's event feed turns it back into a local `notify`).
 */
export const publish = (topic: string) => Effect.zipRight(notify(topic), Effect.flatMap(Db, (db) => db.announce(topic)))

/** Waits for the next `notify` of `topic`, at most `ms`. */
export const nextSignal = (topic: string, ms: number) => Effect.asVoid(signalled(topic, ms))

/** `nextSignal`, saying whether it was a `notify` (true) or the time ran out (false). */
export const signalled = (topic: string, ms: number) =>
  Effect.async<boolean>((resume) => {
    const cancel = onNextSignal(topic, ms, (notified) => resume(Effect.succeed(notified)))
    return Effect.sync(cancel)
  })

/**
 * Calls `then` once, at the next `notify` of `topic` (true) or after `ms` (false), unless cancelled first (the
 * returned function); for the routes outside Effect (http/FastReads.ts).
 */
export const onNextSignal = (topic: string, ms: number, then: (notified: boolean) => void): () => void => {
  const forget = () => {
    const wakers = waiting.get(topic)
    wakers?.delete(wake)
    if (wakers?.size === 0) waiting.delete(topic)
  }
  const wake = () => {
    clearTimeout(timer)
    then(true)
  }
  const timer = setTimeout(() => {
    forget()
    then(false)
  }, ms)
  const wakers = waiting.get(topic) ?? new Set()
  wakers.add(wake)
  waiting.set(topic, wakers)
  return () => {
    clearTimeout(timer)
    forget()
  }
}
