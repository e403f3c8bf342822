/**
 * Push for a quiet command (`execNews`, the bookkeeping in providers/core/follow.ts): the command's log followed
 * over the daemon's WebSocket (`GET …/command/{c}/logs?follow=true`, as the SDK's `getSessionCommandLogs` with
 * callbacks follows it), one socket per execution a job waits on. Every frame and the close (the command ended, its
 * session went, or the connection broke) are news; the frames' bytes are counted against what `execEvents` reads
 * of a log at most.
 */
import { Effect } from "effect"
import type { ProviderSandbox } from "../../../src/providers/Provider.ts"
import { makeFollows, type OpenFollow } from "../../core/follow.ts"
import type { DaytonaContext } from "./wire.ts"

export const makeLogWatches = (ctx: Pick<DaytonaContext, "toolboxSocketUrl" | "openSocket">) => {
  const follows = makeFollows()
  const socketTo = (url: string): OpenFollow => (sink) => {
    const socket = ctx.openSocket(url)
    socket.binaryType = "arraybuffer"
    socket.onmessage = (event: MessageEvent<ArrayBuffer | string>) => sink.data(typeof event.data === "string" ? event.data.length : event.data.byteLength, true)
    socket.onclose = () => sink.closed()
    return { close: () => socket.close() }
  }

  /** `execNews` for a session command at `path` (its `/process/session/{s}/command/{c}`), its log read up to `limit` bytes. */
  const execNews = (sandbox: ProviderSandbox, executionId: string, path: string, limit: number, maxMs: number): Effect.Effect<void> =>
    follows.execNews(executionId, Effect.map(ctx.toolboxSocketUrl(sandbox, `${path}/logs?follow=true`), socketTo), limit, maxMs)

  return { execNews, forget: follows.forget }
}
