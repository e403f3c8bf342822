import { describe, expect, it } from "vitest"
import { pollCap } from "../../src/services/sandboxes/Processes.ts"

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
})
