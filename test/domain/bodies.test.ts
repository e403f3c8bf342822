/** Reading a body with a limit (src/domain/Bodies.ts): whole, cut at the limit, or cancelled by its reader's interruption. */
import { describe, expect, it } from "vitest"
import { readAtMost } from "../../src/domain/Bodies.ts"

/** A body that sends `chunks` and then nothing, ever; `cancelled` resolves when its reader cancels it. */
const stalling = (chunks: ReadonlyArray<string>) => {
  let cancelled!: () => void
  const whenCancelled = new Promise<void>((resolve) => (cancelled = resolve))
  const body = new ReadableStream<Uint8Array>({
    start: (controller) => {
      for (const c of chunks) controller.enqueue(new TextEncoder().encode(c))
    },
    cancel: () => cancelled()
  })
  return { body, whenCancelled }
}

describe("readAtMost", () => {
  it("reads a body whole, and stops (cancelling it) past the limit", async () => {
    const whole = new ReadableStream<Uint8Array>({
      start: (c) => {
        c.enqueue(new TextEncoder().encode("ab"))
        c.enqueue(new TextEncoder().encode("cd"))
        c.close()
      }
    })
    expect(new TextDecoder().decode(await readAtMost(whole, 4))).toBe("abcd")
    const big = stalling(["abc", "def"])
    expect(await readAtMost(big.body, 4)).toBeUndefined()
    await big.whenCancelled
  })

  it("an aborted read cancels its stream and fails: what arrived is never taken for the whole body", async () => {
    const { body, whenCancelled } = stalling(["partial"])
    const interrupted = new AbortController()
    const read = readAtMost(body, 1024, interrupted.signal)
    interrupted.abort(new Error("interrupted"))
    await expect(read).rejects.toThrow("interrupted")
    await whenCancelled
  })
})
