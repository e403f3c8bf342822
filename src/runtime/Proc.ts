/** Host processes as the runtime sees them through /proc. */
import * as fs from "node:fs"

/** Field 22 of /proc/<pid>/stat (start time in clock ticks): tells a pid apart from a later one reusing it. */
export const procStart = (pid: number): string | null => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null
  } catch {
    return null
  }
}

/** A running process (not a zombie) that is still the one started at `start` (when known). */
export const alive = (pid: number, start: string | null = null) => {
  if (!(pid > 0)) return false
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    if (fields[0] === "Z" || fields[0] === "X") return false
    return start === null || fields[19] === start
  } catch {
    return false
  }
}

/** Every descendant of `pid` (for SIGSTOP/SIGKILL where there is no cgroup). */
export const descendants = (pid: number): Array<number> => {
  const children = new Map<number, Array<number>>()
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      const list = children.get(ppid)
      if (list === undefined) children.set(ppid, [Number(entry)])
      else list.push(Number(entry))
    } catch {}
  }
  const out: Array<number> = []
  const stack = [pid]
  while (stack.length > 0) {
    for (const child of children.get(stack.pop()!) ?? []) {
      out.push(child)
      stack.push(child)
    }
  }
  return out
}

/** Host pids of every live process whose real uid is `uid` (a sandbox's processes, wherever they are). */
export const pidsOfUid = (uid: number): Array<number> => {
  const pids: Array<number> = []
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const status = fs.readFileSync(`/proc/${entry}/status`, "utf8")
      const real = /\nUid:\s+(\d+)/.exec(status)?.[1]
      if (Number(real) === uid && !/\nState:\s+[ZX]/.test(status)) pids.push(Number(entry))
    } catch {}
  }
  return pids
}

export const signalAll = (pids: ReadonlyArray<number>, signal: NodeJS.Signals) => {
  for (const pid of pids) {
    if (!(pid > 0)) continue
    try {
      process.kill(pid, signal)
    } catch {}
  }
}

/**
 * Waits between two looks at something the kernel or a jail does next: 1 ms, then twice as long each time up to
 * 50 ms. Fast things are seen at once; slow ones (a busy host, where each look may wait on a kernel lock) are not
 * polled hundreds of times a second.
 */
export const backoff = () => {
  let ms = 1
  return () => {
    const wait = Bun.sleep(ms)
    ms = Math.min(50, ms * 2)
    return wait
  }
}

/**
 * `check`, shared by concurrent callers: one run at a time, and a caller joins the next run to start, never one
 * already under way (it may have looked before the caller asked). However many ask at once, at most two runs.
 */
export const nextCheck = <A>(check: () => Promise<A>): (() => Promise<A>) => {
  let running: Promise<A> | undefined
  let queued: Promise<A> | undefined
  const start = (): Promise<A> => {
    const run: Promise<A> = check().finally(() => {
      if (running === run) running = undefined
    })
    running = run
    return run
  }
  return () => {
    if (running === undefined) return start()
    queued ??= running.then(() => undefined, () => undefined).then(() => {
      queued = undefined
      return start()
    })
    return queued
  }
}

/** Collects up to `max` bytes of a stream in the background (the rest is read and dropped) until stopped. */
export const drainBounded = (stream: ReadableStream<Uint8Array>, max: number) => {
  const reader = stream.getReader()
  const chunks: Array<Uint8Array> = []
  let kept = 0
  let stopped = false
  const done = (async () => {
    try {
      while (!stopped) {
        const { done, value } = await reader.read()
        if (done) return
        if (kept < max) {
          chunks.push(value.subarray(0, max - kept))
          kept += Math.min(value.length, max - kept)
        }
      }
    } catch {}
  })()
  return {
    done,
    text: () => Buffer.concat(chunks).toString("utf8").trim(),
    /** Closes our end: from now on nothing the jail writes there reaches the gateway. */
    stop: () => {
      stopped = true
      void reader.cancel().catch(() => undefined)
    }
  }
}
