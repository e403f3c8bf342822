/**
 * Work serialised per key (used by the emulators and the gateway alike): what an emulator needs where one sandbox's state changes must not interleave (a pause
 * and a resume of the same VM, the commands written to one session's shell) while other sandboxes go on.
 *
 *   const serial = keyedSerial()
 *   await serial.run(vmId, async () => { ... })   // after every earlier work on vmId has settled
 *
 * Work on one key runs one at a time, in the order `run` was called, whatever the outcome of the work before it
 * (a failure is its caller's, never the next one's); keys are independent. A key is forgotten as soon as its last
 * work settles, so keys of sandboxes long gone hold no memory.
 */
export interface KeyedSerial {
  /** Runs `work` after all work asked for earlier on `key`; answers (or fails with) what `work` does. */
  readonly run: <A>(key: string, work: () => Promise<A>) => Promise<A>
  /** How many keys have work queued or running (0 once everything has settled). */
  readonly busyKeys: () => number
}

export const keyedSerial = (): KeyedSerial => {
  /** Per busy key: a promise that settles (never rejects) when the last work asked for on it has. */
  const tails = new Map<string, Promise<void>>()
  return {
    run: <A>(key: string, work: () => Promise<A>): Promise<A> => {
      const next = (tails.get(key) ?? Promise.resolve()).then(work)
      const tail = next.then(() => undefined, () => undefined)
      tails.set(key, tail)
      void tail.then(() => {
        if (tails.get(key) === tail) tails.delete(key)
      })
      return next
    },
    busyKeys: () => tails.size
  }
}
