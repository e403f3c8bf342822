import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { pollCap, waitsOnNews } from "../../src/services/sandboxes/Processes.ts"
import { makeE2BProvider } from "../../providers/e2b/adapter/index.ts"
import { makeDaytonaProvider } from "../../providers/daytona/adapter/index.ts"

describe("how often a running command's provider is polled", () => {
  it("at most 10 ms apart while the command is busy; once quiet, a tenth of how long it has been, at most 250 ms", () => {
    expect(pollCap(0)).toBe(10)
    expect(pollCap(99)).toBe(10)
    expect(pollCap(100)).toBe(10)
    expect(pollCap(500)).toBe(50)
    expect(pollCap(2_500)).toBe(250)
    // A command quiet for ten minutes (a server) is polled 4 times a second, not 100.
    expect(pollCap(600_000)).toBe(250)
  })

  it("a quiet command waits on its provider's news: after a second by default, at once where the news is in memory, never without news", () => {
    const news = () => Effect.void
    expect([waitsOnNews({ execNews: news }, 999), waitsOnNews({ execNews: news }, 1_000)]).toEqual([false, true])
    expect(waitsOnNews({ execNews: news, execNewsAfterMs: 0 }, 0)).toBe(true)
    expect(waitsOnNews({ execNews: undefined }, 60_000)).toBe(false)
    // As the adapters say: E2B reads its stream as it comes; Daytona's wait opens a socket, not for a short command.
    const e2b = makeE2BProvider({ apiKey: "k", apiUrl: "http://127.0.0.1:9", sandboxUrl: "http://127.0.0.1:9", mode: "emulated" })
    const daytona = makeDaytonaProvider({ baseUrl: "http://127.0.0.1:9", apiKey: "k", mode: "emulated" })
    expect([waitsOnNews(e2b, 0), waitsOnNews(daytona, 0), waitsOnNews(daytona, 1_000)]).toEqual([true, false, true])
  })
})
