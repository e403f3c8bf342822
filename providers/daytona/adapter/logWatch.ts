/**
 * Push for a quiet command (`execNews`): the command's log followed over the daemon's WebSocket (`GET
 * …/command/{c}/logs?follow=true`, as the SDK's `getSessionCommandLogs` with callbacks follows it), one socket per
 * execution a job waits on. Every frame and the close (the command ended, its session went, or the connection
 * broke) are news: the job then polls `execEvents`, which stays what reads the output. The frames' bytes are
 * counted, never kept, and bounded as a log read is: past `limit` bytes (what `execEvents` reads of a log at most)
 * the socket is closed and the command is polled as before, so a flooding sandbox costs no more reading here.
 *
 * Without it a quiet command was polled four times a second, each poll a status call and a log call, each of
 * those several calls into the sandbox; with it, a quiet command costs its socket.
 */
import { Effect } from "effect"
import type { ProviderSandbox } from "../../../src/providers/Provider.ts"
import { News } from "../../core/news.ts"
import type { DaytonaContext } from "./wire.ts"

/** A watch nobody asked about for this long is closed (its job ended, or moved to another gateway). */
const UNASKED_MS = 30_000
/** Sockets held at once; past it the oldest goes. */
const MAX_WATCHES = 512
/** After a watch that closed, the next one opens no sooner than this (a socket the daemon refuses must not spin a job). */
const REOPEN_MS = 1_000
/** How often a command whose log outgrew its watch is looked at: as often as a quiet command was polled. */
const POLLED_MS = 250

interface Watch {
  readonly socket: WebSocket
  /** Told by every frame and by the close. */
  readonly news: News
  /** Bytes of the frames so far. */
  bytes: number
  closed: boolean
  askedAt: number
}

export const makeLogWatches = (ctx: Pick<DaytonaContext, "toolboxSocketUrl" | "openSocket">) => {
  const watches = new Map<string, Watch>()
  /** When an execution whose watch closed may be watched again. */
  const reopenAt = new Map<string, number>()
  /** Executions whose log outgrew a watch: polled (least recently added first out). */
  const outgrown = new Set<string>()

  const forget = (executionId: string) => {
    const watch = watches.get(executionId)
    reopenAt.delete(executionId)
    outgrown.delete(executionId)
    if (watch === undefined) return
    watches.delete(executionId)
    watch.closed = true
    watch.socket.close()
    watch.news.tell()
  }

  const open = (executionId: string, url: string, limit: number): Watch => {
    const now = Date.now()
    for (const [id, other] of watches) if (now - other.askedAt > UNASKED_MS) forget(id)
    for (const [id, at] of reopenAt) if (at < now) reopenAt.delete(id)
    if (watches.size >= MAX_WATCHES) forget(watches.keys().next().value!)
    const socket = ctx.openSocket(url)
    socket.binaryType = "arraybuffer"
    const watch: Watch = { socket, news: new News(), bytes: 0, closed: false, askedAt: now }
    socket.onmessage = (event: MessageEvent<ArrayBuffer | string>) => {
      watch.bytes += typeof event.data === "string" ? event.data.length : event.data.byteLength
      if (watch.bytes > limit && !watch.closed) {
        if (outgrown.size >= MAX_WATCHES) outgrown.delete(outgrown.values().next().value!)
        outgrown.add(executionId)
        socket.close()
      }
      watch.news.tell()
    }
    socket.onclose = () => {
      watch.closed = true
      watch.news.tell()
    }
    watches.set(executionId, watch)
    return watch
  }

  /** `execNews` for a session command at `path` (its `/process/session/{s}/command/{c}`), its log read up to `limit` bytes. */
  const execNews = (sandbox: ProviderSandbox, executionId: string, path: string, limit: number, maxMs: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (outgrown.has(executionId)) {
        watches.delete(executionId)
        return Effect.sleep(Math.min(maxMs, POLLED_MS))
      }
      const watch = watches.get(executionId)
      if (watch !== undefined && !watch.closed) return wait(watch, maxMs)
      if (watch !== undefined) {
        // Closed: the command ended, its session went, or the connection broke. The close is news once; a later
        // wait opens a new socket, not at once.
        watches.delete(executionId)
        reopenAt.set(executionId, Date.now() + REOPEN_MS)
        if (watch.news.pending) return Effect.void
      }
      const after = reopenAt.get(executionId)
      if (after !== undefined && Date.now() < after) return Effect.sleep(Math.min(maxMs, after - Date.now()))
      reopenAt.delete(executionId)
      return Effect.flatMap(Effect.either(ctx.toolboxSocketUrl(sandbox, `${path}/logs?follow=true`)), (url) => {
        if (url._tag === "Left") return Effect.sleep(maxMs)
        let watch: Watch
        try {
          watch = open(executionId, url.right, limit)
        } catch {
          // An address the socket refuses outright (a malformed toolbox URL): polled, as without a watch.
          reopenAt.set(executionId, Date.now() + REOPEN_MS)
          return Effect.sleep(Math.min(maxMs, POLLED_MS))
        }
        return wait(watch, maxMs)
      })
    })

  const wait = (watch: Watch, maxMs: number) =>
    Effect.suspend(() => {
      watch.askedAt = Date.now()
      return watch.news.wait(maxMs)
    })

  return { execNews, forget }
}
