/**
 * The shells that start the sandbox's commands and programs (processes.ts, desktop.ts): which shell, the base
 * environment, the cgroup join that comes before anything runs, and the standby shell waiting for the next command.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Protocol from "../AgentProtocol.ts"
import { RUN_DIR } from "./common.ts"

type ExecRequest = Protocol.ExecRequest

/** Cgroup files a command joins before it runs (the runtime binds them in when cgroups are in use). */
const CGROUP_FILES = ["/run/cgroup/pids.procs", "/run/cgroup/memory.procs"].filter((f) => fs.existsSync(f))
/** The shell lines that move the shell itself into them (before it runs anything else). */
export const JOIN_CGROUPS = CGROUP_FILES.map((f) => `echo $$ > ${f} || exit 125`)
/**
 * The shell that starts commands: the jail's /bin/sh, or (in a jail on an OCI image, which may have no shell or
 * no glibc) the host's, run through the host's loader from the runtime's own read-only directory (AGENT_SHELL).
 */
export const SHELL: ReadonlyArray<string> = (() => {
  try {
    const parsed = JSON.parse(process.env["AGENT_SHELL"] ?? "") as unknown
    if (Array.isArray(parsed) && parsed.length > 0 && parsed.every((a) => typeof a === "string")) return parsed as Array<string>
  } catch {}
  return ["/bin/sh"]
})()
/** What every command's environment starts from (the request's env adds to it and may replace it). */
export const BASE_ENV: Readonly<Record<string, string>> = {
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: "/workspace",
  USER: "user",
  LANG: "C.UTF-8"
}

/** A word the shell reads back as exactly `s` (single quotes; a quote inside is closed, escaped and reopened). */
const shellWord = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`
export const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * The next command's shell, started early. Joining a cgroup (writing its procs file) waits in the kernel for an
 * RCU grace period — about 10 ms here, most of a short command's start — so when a command starts, the shell for
 * the one after it is spawned and joins the command cgroups meanwhile, then waits for a line on its standard
 * input. A command that claims it writes its script (stdin, cwd, environment, exec of the argv) and that line; the
 * shell sources the script and execs the command: the same pid, session, pipes and cgroups as a shell spawned for
 * it. Agents run commands in bursts; one not claimed within STANDBY_MS is killed, so an idle sandbox's command
 * cgroups empty. The script sits in the sandbox's own filesystem: a sandbox that edits it (or kills or stops the
 * shell) runs its own code in its own cgroups, or falls back to a shell spawned for the command.
 */
interface Standby {
  readonly proc: Bun.Subprocess<"pipe", "pipe", "pipe">
  readonly script: string
  readonly expiry: ReturnType<typeof setTimeout>
}
const STANDBY_DIR = path.join(RUN_DIR, "standby")
const STANDBY_MS = 2000
let standby: Standby | undefined

export const spawnStandby = () => {
  if (CGROUP_FILES.length === 0 || standby !== undefined) return
  try {
    fs.mkdirSync(STANDBY_DIR, { recursive: true })
    const script = path.join(STANDBY_DIR, `${crypto.randomUUID()}.sh`)
    const proc = Bun.spawn({
      cmd: [...SHELL, "-c", [...JOIN_CGROUPS, "IFS= read -r go || exit 125", '. "$1"'].join("; "), "sh", script],
      cwd: "/",
      env: { ...BASE_ENV },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      detached: true
    })
    void proc.exited.then(() => fs.rmSync(script, { force: true }))
    const expiry = setTimeout(() => {
      if (standby?.proc !== proc) return
      standby = undefined
      proc.kill("SIGKILL")
    }, STANDBY_MS)
    standby = { proc, script, expiry }
  } catch {
    // None: the next command gets a shell spawned for it.
  }
}

/**
 * A program of the sandbox's own that the agent keeps (the desktop's display server, window manager, recorder):
 * started like a command — the cgroup join first, in a session of its own — so it counts against the sandbox's
 * limits as its commands do. Its output goes nowhere (stderr is kept for a short failure message).
 */
export const spawnInSandbox = (command: ReadonlyArray<string>, env: Readonly<Record<string, string>>, stdin: "ignore" | "pipe") =>
  Bun.spawn({
    cmd: [...SHELL, "-c", [...JOIN_CGROUPS, 'exec "$@"'].join("; "), "sh", ...command],
    cwd: "/workspace",
    env: { ...env },
    stdin,
    stdout: stdin === "pipe" ? "pipe" : "ignore",
    stderr: stdin === "pipe" ? "pipe" : "ignore",
    detached: true
  })

/** Whether `pid` waits as a standby does: not gone, not a zombie, not stopped or traced (it would never read its line). */
const isWaiting = (pid: number) => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return !"ZXxTt".includes(stat.charAt(stat.lastIndexOf(")") + 2))
  } catch {
    return false
  }
}

/** The waiting shell, if it still waits; it is no longer the standby either way. */
export const claimStandby = (): Standby | undefined => {
  const claimed = standby
  standby = undefined
  if (claimed === undefined) return undefined
  clearTimeout(claimed.expiry)
  if (claimed.proc.exitCode === null && claimed.proc.signalCode === null && isWaiting(claimed.proc.pid)) return claimed
  claimed.proc.kill("SIGKILL")
  return undefined
}

/** What a claimed standby sources: standard input, working directory, environment, then the command itself. */
const standbyScript = (spec: ExecRequest, cwd: string, env: Readonly<Record<string, string>>) =>
  [
    ...(spec.stdin === false ? ["exec </dev/null"] : []),
    `cd -- ${shellWord(cwd)} || exit 125`,
    // The shell's own note of where it was (a shell spawned in `cwd` has none).
    "unset OLDPWD",
    ...Object.entries(env).map(([k, v]) => `export ${k}=${shellWord(v)}`),
    `exec ${spec.command.map(shellWord).join(" ")}`,
    ""
  ].join("\n")

/**
 * Gives a claimed standby its command: the script (a new file: whatever the sandbox put at its name first makes
 * this fail, and the command gets a shell of its own), then the line it waits for. Undefined when it cannot.
 */
export const handOver = (claimed: Standby | undefined, spec: ExecRequest, cwd: string, env: Readonly<Record<string, string>>) => {
  if (claimed === undefined) return undefined
  try {
    fs.writeFileSync(claimed.script, standbyScript(spec, cwd, env), { flag: "wx" })
  } catch {
    claimed.proc.kill("SIGKILL")
    return undefined
  }
  // A shell gone meanwhile (the sandbox killed it) fails these writes: its exit is then the command's.
  const settle = (written: number | Promise<number>) => void Promise.resolve(written).catch(() => undefined)
  try {
    claimed.proc.stdin.write("\n")
    settle(spec.stdin === false ? claimed.proc.stdin.end() : claimed.proc.stdin.flush())
  } catch {}
  return claimed
}
