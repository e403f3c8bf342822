/**
 * The Daytona emulator's one-shot commands and what it asks a sandbox once:
 * - `POST /process/execute {command, cwd?, envs?, timeout?}` (the SDK's `process.executeCommand`), as the daemon runs
 *   it: the command piped to the user's shell on its stdin, stdout and stderr through one pipe (in the order written), the
 *   answer `{exitCode, result}` once it ends; a `timeout` (seconds, 0 none) it passes is a 408
 *   PROCESS_EXECUTION_TIMEOUT; a working directory that is not there is exit code -1 with the reason as its result.
 *   Its output is kept up to BUFFERED_OUTPUT_BYTES (the daemon holds it all).
 * - the sandbox's working directory (where its processes start and relative paths resolve: the image's WorkingDir,
 *   else /workspace) and $HOME, asked once with `pwd` and kept in the books (`GET /work-dir`, `GET /user-home-dir`).
 */
import { Schema } from "effect"
import * as path from "node:path"
import type { ExecEvent, ExecSpec, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Books, EmulatedSandbox } from "./books.ts"
import { decodeBody, json, HttpFailure, userShell } from "./wire.ts"

/** Output an answer that holds it whole carries at most (the rest is dropped). */
export const BUFFERED_OUTPUT_BYTES = 32 * 1024 * 1024

type Output = Extract<ExecEvent, { type: "stdout" | "stderr" }>
type Exit = Extract<ExecEvent, { type: "exit" }>

/** Runs `spec` to its end (with `input` on its stdin, then end-of-file): its output events and its exit. */
export const runToExit = async (runtime: LocalRuntimeShape, sandboxId: string, spec: ExecSpec, input?: Uint8Array): Promise<{ readonly output: Array<Output>; readonly exit: Exit }> => {
  const started = await run(runtime.exec(sandboxId, spec))
  if (input !== undefined) await run(runtime.sendInput(sandboxId, started.execId, input, true))
  const output: Array<Output> = []
  let seq = 0
  for (;;) {
    for (const event of await run(runtime.execEvents(sandboxId, started.execId, seq, 1000))) {
      seq = event.seq + 1
      if (event.type === "exit") return { output, exit: event }
      output.push(event)
    }
  }
}

const text = (output: ReadonlyArray<Output>, type?: "stdout" | "stderr") =>
  Buffer.concat(output.filter((e) => type === undefined || e.type === type).map((e) => e.data)).toString("utf8")

/** An environment variable's name as the daemon takes it (common.ValidateEnvKeys). */
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/

const ExecuteBody = Schema.Struct({
  command: Schema.String,
  timeout: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.nonNegative()))),
  cwd: Schema.optional(Schema.NullOr(Schema.String)),
  envs: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })))
})

export const makeExecute = (books: Books, runtime: LocalRuntimeShape) => {
  const asking = new Map<string, Promise<{ readonly workDir: string; readonly homeDir: string }>>()

  /** The sandbox's working directory and home, asked of it once (a sandbox answers what it likes: only absolute paths are kept). */
  const dirsOf = (sandbox: EmulatedSandbox): Promise<{ readonly workDir: string; readonly homeDir: string }> => {
    if (sandbox.workDir !== undefined && sandbox.homeDir !== undefined) return Promise.resolve({ workDir: sandbox.workDir, homeDir: sandbox.homeDir })
    let pending = asking.get(sandbox.id)
    if (pending === undefined) {
      pending = (async () => {
        const { output } = await runToExit(runtime, sandbox.id, { command: ["sh", "-c", "pwd; printf '%s\\n' \"$HOME\""], stdin: false, maxOutputBytes: 8192, timeoutMs: 10_000 })
        const [work, home] = text(output, "stdout").split("\n")
        const absolute = (p: string | undefined) => (p !== undefined && p.startsWith("/") && !p.includes("\0") ? path.posix.normalize(p) : undefined)
        const workDir = absolute(work) ?? "/workspace"
        const homeDir = absolute(home) ?? workDir
        sandbox.workDir = workDir
        sandbox.homeDir = homeDir
        books.save()
        return { workDir, homeDir }
      })().finally(() => asking.delete(sandbox.id))
      asking.set(sandbox.id, pending)
    }
    return pending
  }

  /** A path as the daemon resolves it: relative ones against the working directory. */
  const resolvePath = async (sandbox: EmulatedSandbox, p: string) =>
    p.startsWith("/") ? path.posix.normalize(p) : path.posix.join((await dirsOf(sandbox)).workDir, p === "" ? "." : p)

  const execute = async (request: Request, sandbox: EmulatedSandbox) => {
    const body = await decodeBody(request, ExecuteBody)
    if (body.command.trim() === "") throw new HttpFailure(400, "command cannot be empty or whitespace-only")
    const envs = body.envs ?? {}
    const badKey = Object.keys(envs).find((k) => !ENV_KEY.test(k))
    if (badKey !== undefined) throw new HttpFailure(400, `invalid environment variable name: ${badKey.slice(0, 100)}`)
    const cwd = body.cwd === undefined || body.cwd === null ? undefined : await resolvePath(sandbox, body.cwd)
    if (cwd !== undefined) {
      const dir = await run(runtime.statFile(sandbox.id, cwd))
      if (dir._tag === "None" || dir.value.type !== "directory") return json({ exitCode: -1, result: `chdir ${cwd}: no such file or directory` })
    }
    // stderr into stdout's pipe first: one pipe for both, as the daemon's (Go gives a command one pipe when its
    // Stdout and Stderr are the same writer), so the result is in the order written.
    const { output, exit } = await runToExit(runtime, sandbox.id, {
      command: userShell(),
      cwd,
      env: envs,
      stdin: true,
      maxOutputBytes: BUFFERED_OUTPUT_BYTES,
      ...(body.timeout !== undefined && body.timeout !== null && body.timeout > 0 ? { timeoutMs: body.timeout * 1000 } : {})
    }, new TextEncoder().encode(`exec 2>&1\n${body.command}`))
    if (exit.timedOut) throw new HttpFailure(408, "command execution timeout", "PROCESS_EXECUTION_TIMEOUT")
    // Go's ExitCode() is -1 for a process ended by a signal.
    return json({ exitCode: exit.exitCode ?? -1, result: text(output) })
  }

  return {
    execute,
    dirsOf,
    resolvePath,
    workDir: async (sandbox: EmulatedSandbox) => json({ dir: (await dirsOf(sandbox)).workDir }),
    homeDir: async (sandbox: EmulatedSandbox) => json({ dir: (await dirsOf(sandbox)).homeDir })
  }
}

export type Execute = ReturnType<typeof makeExecute>
