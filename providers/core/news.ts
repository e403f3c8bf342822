/**
 * News for a process job waiting on a quiet command (`SandboxProvider.execNews`): told by whatever learns of the
 * command's output or end (a frame on a socket, an event read into a buffer); a wait ends at news it has not taken
 * yet, or after its time.
 */
import { Effect } from "effect"

export class News {
  private told = 0
  private taken = 0
  private readonly waiters = new Set<() => void>()

  tell(): void {
    this.told++
    for (const wake of this.waiters) wake()
    this.waiters.clear()
  }

  /** Whether news came that no wait has taken. */
  get pending(): boolean {
    return this.told !== this.taken
  }

  wait(maxMs: number): Effect.Effect<void> {
    return Effect.async<void>((resume) => {
      if (this.pending) {
        this.taken = this.told
        return resume(Effect.void)
      }
      const done = () => {
        clearTimeout(timer)
        this.waiters.delete(done)
        this.taken = this.told
        resume(Effect.void)
      }
      const timer = setTimeout(done, maxMs)
      this.waiters.add(done)
      return Effect.sync(() => {
        clearTimeout(timer)
        this.waiters.delete(done)
      })
    })
  }
}
