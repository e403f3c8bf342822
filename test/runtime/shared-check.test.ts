/**
 * `nextCheck` (src/runtime/Proc.ts): concurrent creates share the egress filter's check, and the filter fails
 * closed only if no caller is answered by a check that looked before it asked (an operator may flush the ruleset
 * in between). Pure: a check whose answers the test controls.
 */
import { describe, expect, it } from "vitest"
import { nextCheck } from "../../src/runtime/Proc.ts"

/** A check that records when each run started and resolves only when told, with the state of the world then. */
const controlled = () => {
  let world = true
  const runs: Array<{ readonly startedWith: boolean; readonly finish: () => void }> = []
  const check = () =>
    new Promise<boolean>((resolve) => {
      const startedWith = world
      runs.push({ startedWith, finish: () => resolve(startedWith) })
    })
  return { runs, check, set: (value: boolean) => (world = value) }
}

describe("a check shared by concurrent callers", () => {
  it("one run at a time; a caller arriving during a run gets the next run, which looked after it asked", async () => {
    const c = controlled()
    const shared = nextCheck(c.check)
    const first = shared()
    expect(c.runs.length).toBe(1)
    // The filter goes away while the first check runs: a caller asking now must not get that check's answer.
    c.set(false)
    const second = shared()
    const third = shared()
    expect(c.runs.length).toBe(1)
    c.runs[0]!.finish()
    expect(await first).toBe(true)
    await Bun.sleep(0)
    expect(c.runs.length).toBe(2)
    c.runs[1]!.finish()
    expect(await second).toBe(false)
    expect(await third).toBe(false)
    // Nothing running: the next caller starts its own run.
    c.set(true)
    const fourth = shared()
    expect(c.runs.length).toBe(3)
    c.runs[2]!.finish()
    expect(await fourth).toBe(true)
  })

  it("a failed run fails its callers only; the next callers get a run of their own", async () => {
    let fail = true
    const shared = nextCheck(async () => {
      if (fail) throw new Error("nft is gone")
      return true
    })
    await expect(shared()).rejects.toThrow("nft is gone")
    fail = false
    expect(await shared()).toBe(true)
  })
})
