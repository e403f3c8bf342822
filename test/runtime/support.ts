/** Helpers for the local runtime tests: a runtime over a temp DATA_DIR, running commands, host-side views. */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { cgroupPath, cgroupScope } from "../../src/runtime/Cgroups.ts"
import { descendants, diskPath, type JailState } from "../../src/runtime/Jail.ts"
import { leasesUnder } from "../../src/runtime/UidLeases.ts"
import type { ExecEvent } from "../../src/runtime/LocalRuntime.ts"
import { type LocalRuntimeHandle, type LocalRuntimeOptions, makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { tempDataDir } from "../support/server.ts"

export const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
/** The failure of an effect that must fail (its RuntimeError), or an error when it succeeded. */
export const failure = async <A, E>(effect: Effect.Effect<A, E>): Promise<E> => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (result._tag === "Right") throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
  return result.left
}

export interface TestRuntime {
  readonly dataDir: string
  readonly rt: LocalRuntimeHandle
  /** Reaps every jail, shuts the runtime down and removes the DATA_DIR. */
  readonly cleanup: () => Promise<void>
}

export const newRuntime = (label: string, options: LocalRuntimeOptions = {}): TestRuntime => {
  const dataDir = tempDataDir(`rt-${label}`)
  const rt = makeLocalRuntime(dataDir, options)
  return {
    dataDir,
    rt,
    cleanup: async () => {
      await run(rt.shutdown)
      await run(makeLocalRuntime(dataDir).reap(new Set()))
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  }
}

export type ExitEvent = Extract<ExecEvent, { type: "exit" }>
export interface Finished {
  readonly execId: string
  readonly events: ReadonlyArray<ExecEvent>
  readonly stdout: string
  readonly stderr: string
  readonly exit: ExitEvent
}

const text = (events: ReadonlyArray<ExecEvent>, type: "stdout" | "stderr") =>
  Buffer.concat(events.flatMap((e) => (e.type === type ? [Buffer.from(e.data)] : []))).toString()

/** Reads an execution's events until its exit event. */
export const collect = async (rt: LocalRuntimeHandle, id: string, execId: string): Promise<Finished> => {
  const events: Array<ExecEvent> = []
  const deadline = Date.now() + 120_000
  while (!events.some((e) => e.type === "exit")) {
    if (Date.now() > deadline) throw new Error(`execution ${execId} did not finish`)
    events.push(...(await run(rt.execEvents(id, execId, events.length, 5000))))
  }
  return { execId, events, stdout: text(events, "stdout"), stderr: text(events, "stderr"), exit: events.at(-1) as ExitEvent }
}

/** Runs `sh -c script` to its exit. */
export const sh = async (
  rt: LocalRuntimeHandle,
  id: string,
  script: string,
  extra: { timeoutMs?: number; maxOutputBytes?: number; env?: Record<string, string>; cwd?: string } = {}
): Promise<Finished> => {
  const exec = await run(rt.exec(id, { command: ["sh", "-c", script], maxOutputBytes: extra.maxOutputBytes ?? 1 << 20, timeoutMs: extra.timeoutMs, env: extra.env, cwd: extra.cwd }))
  return collect(rt, id, exec.execId)
}

export const stateOf = (dataDir: string, id: string): JailState =>
  JSON.parse(fs.readFileSync(path.join(dataDir, "sandboxes", id, "state.json"), "utf8")) as JailState

/** A path inside a running sandbox's disk, as the host reaches it (e.g. inJail(dir, id, "root", "workspace", "f")). */
export const inJail = (dataDir: string, id: string, ...rel: Array<string>) => diskPath(stateOf(dataDir, id), ...rel)

/** uid leases held for jails of this DATA_DIR. */
export const leasesOf = (dataDir: string) => leasesUnder(path.join(dataDir, "sandboxes"))

/** Loop devices whose backing file is a disk image of this DATA_DIR (of one sandbox, when `id` is given). */
export const loopsOf = (dataDir: string, id?: string): Array<string> => {
  const found: Array<string> = []
  const prefix = path.join(dataDir, "sandboxes", id ?? "") + (id === undefined ? "" : "/")
  for (const device of fs.readdirSync("/sys/block").filter((d) => /^loop\d+$/.test(d))) {
    try {
      if (fs.readFileSync(`/sys/block/${device}/loop/backing_file`, "utf8").startsWith(prefix)) found.push(device)
    } catch {}
  }
  return found
}

export const CONTROLLERS = ["pids", "memory", "cpu", "freezer"] as const
export const cgroupDir = (controller: string, dataDir: string, id: string) => path.join("/sys/fs/cgroup", controller, cgroupPath(cgroupScope(dataDir), id))

/** Host pids of every process of a jail (its cgroups, and the pid tree under bwrap). */
export const hostPids = (dataDir: string, id: string): Array<number> => {
  const pids = new Set<number>()
  for (const controller of CONTROLLERS) {
    for (const file of ["cgroup.procs", "work/cgroup.procs"]) {
      try {
        for (const line of fs.readFileSync(path.join(cgroupDir(controller, dataDir, id), file), "utf8").split("\n")) if (line) pids.add(Number(line))
      } catch {}
    }
  }
  try {
    const state = stateOf(dataDir, id)
    for (const pid of [state.bwrapPid, ...descendants(state.bwrapPid)]) pids.add(pid)
  } catch {}
  return [...pids].filter((pid) => {
    try {
      return !/^\d+ \(.*\) [ZX]/.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"))
    } catch {
      return false
    }
  })
}

/** Host pid of the jail's agent (the bun process running its main.js). */
export const agentHostPid = (dataDir: string, id: string): number => {
  const pid = hostPids(dataDir, id).find((p) => {
    try {
      const argv = fs.readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0")
      return argv[0] === "/opt/agent/bun" && argv[1] === "/opt/agent/lib/main.js"
    } catch {
      return false
    }
  })
  if (pid === undefined) throw new Error(`no agent process for ${id}`)
  return pid
}

export const rssKb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0)

export const waitFor = async (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(20)
  }
}
