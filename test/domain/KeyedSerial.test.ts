/** The keyed serialiser: in order per key, keys independent, failures stay their caller's, finished keys forgotten. */
import { describe, expect, it } from "vitest"
import { keyedSerial } from "../../src/domain/KeyedSerial.ts"

/** A promise settled by hand, so the test decides when each piece of work ends (no timers). */
const gate = () => {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { open, opened }
}
/** Lets every pending promise callback run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("keyedSerial", () => {
  it("runs work on one key one at a time, in the order asked, each answering its own value", async () => {
    const serial = keyedSerial()
    const log: Array<string> = []
    const gates = [gate(), gate(), gate()]
    const results = gates.map((g, i) =>
      serial.run("vm-1", async () => {
        log.push(`start ${i}`)
        await g.opened
        log.push(`end ${i}`)
        return i
      })
    )
    await settle()
    expect(log).toEqual(["start 0"])
    gates[2]!.open() // the last one's gate opening first changes nothing: it has not started
    gates[1]!.open()
    await settle()
    expect(log).toEqual(["start 0"])
    gates[0]!.open()
    expect(await Promise.all(results)).toEqual([0, 1, 2])
    expect(log).toEqual(["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"])
  })

  it("keeps keys independent: work on another key does not wait", async () => {
    const serial = keyedSerial()
    const held = gate()
    const slow = serial.run("vm-1", () => held.opened.then(() => "slow"))
    expect(await serial.run("vm-2", async () => "other")).toBe("other")
    await settle()
    expect(serial.busyKeys()).toBe(1) // vm-1 only: vm-2's work is done and its key forgotten
    held.open()
    expect(await slow).toBe("slow")
  })

  it("gives a failure to its own caller; the next work on the key still runs", async () => {
    const serial = keyedSerial()
    const failed = serial.run("vm-1", async () => {
      throw new Error("boom")
    })
    const thrownSync = serial.run("vm-1", () => {
      throw new Error("sync boom")
    })
    const after = serial.run("vm-1", async () => "ran")
    await expect(failed).rejects.toThrow("boom")
    await expect(thrownSync).rejects.toThrow("sync boom")
    expect(await after).toBe("ran")
  })

  it("forgets a key once its last work settles (no memory per finished key), and serialises it again after", async () => {
    const serial = keyedSerial()
    await Promise.all(Array.from({ length: 100 }, (_, i) => serial.run(`vm-${i}`, async () => i)))
    await serial.run("vm-x", async () => {
      throw new Error("failed work is forgotten too")
    }).catch(() => undefined)
    await settle()
    expect(serial.busyKeys()).toBe(0)
    const log: Array<number> = []
    const held = gate()
    const first = serial.run("vm-1", async () => (await held.opened, log.push(1)))
    const second = serial.run("vm-1", async () => log.push(2))
    expect(serial.busyKeys()).toBe(1)
    held.open()
    await Promise.all([first, second])
    expect(log).toEqual([1, 2])
    await settle()
    expect(serial.busyKeys()).toBe(0)
  })
})
