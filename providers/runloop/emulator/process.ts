/**
 * The Runloop emulator's executions: `POST /v1/devboxes/{id}/execute_async {command}` (a shell line run from the
 * user's home, `/workspace` here, in a running devbox), `GET …/executions/{execution_id}` (`running`, or
 * `completed` with the exit status as a shell reports it — 128 + the signal's number for a killed command — and the
 * whole output), `POST …/executions/{execution_id}/kill` (SIGKILL, to the process group when asked; an execution
 * already over is answered as it is). At suspend, running executions are killed and how every execution ended is
 * kept, so a suspended devbox's executions are still answered. Persistent shells (`shell_name`) and stdin are
 * refused: not emulated.
 */
import { Schema } from "effect"
import * as os from "node:os"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import { type Books, type Devbox, type Execution, newId } from "./books.ts"
import { HttpFailure, json, readBody } from "./http.ts"

/** What one execution keeps of its output. */
const MAX_OUTPUT_BYTES = 10 * 1024 * 1024
/** A status request waits this long for a running command to end, so a quick exit is seen at once. */
const STATUS_WAIT_MS = 50

const ExecuteAsync = Schema.Struct({
  command: Schema.String.pipe(Schema.minLength(1)),
  shell_name: Schema.optional(Schema.NullOr(Schema.String)),
  attach_stdin: Schema.optional(Schema.NullOr(Schema.Boolean))
})
const Kill = Schema.Struct({ kill_process_group: Schema.optional(Schema.NullOr(Schema.Boolean)) })

export const makeExecutions = (books: Books, runtime: LocalRuntimeShape) => {
  const { executions } = books

  const executionOr404 = (d: Devbox, executionId: string) => {
    const e = executions.get(executionId)
    if (e === undefined || e.devboxId !== d.id) throw new HttpFailure(404, `Execution ${executionId} not found`)
    return e
  }

  const describe = async (d: Devbox, e: Execution, waitMs = 0) => {
    const base = { devbox_id: d.id, execution_id: e.executionId, shell_name: null }
    if (e.final != null) {
      const { exitStatus, stdout, stderr, truncated } = e.final
      return { ...base, status: "completed", exit_status: exitStatus, stdout, stderr, stdout_truncated: truncated, stderr_truncated: truncated }
    }
    let info = await run(runtime.getExec(d.id, e.execId))
    if (info.state === "running" && waitMs > 0) {
      // The runtime wakes on the process's events; the exit is one of them.
      const deadline = Date.now() + waitMs
      for (let seen = 0; info.state === "running" && Date.now() < deadline;) {
        const events = await run(runtime.execEvents(d.id, e.execId, seen, deadline - Date.now()))
        seen += events.length
        if (events.at(-1)?.type === "exit") info = await run(runtime.getExec(d.id, e.execId))
      }
    }
    if (info.state === "running") return { ...base, status: "running", exit_status: null, stdout: null, stderr: null, stdout_truncated: null, stderr_truncated: null }
    const events = await run(runtime.execEvents(d.id, e.execId, 0))
    const text = (type: "stdout" | "stderr") => Buffer.concat(events.flatMap((ev) => (ev.type === type ? [ev.data] : []))).toString("utf8")
    const exit = events.findLast((ev) => ev.type === "exit")
    const signal = exit?.type === "exit" ? exit.signal : null
    const signo = signal === null ? undefined : os.constants.signals[signal as keyof typeof os.constants.signals]
    const exitStatus = info.exitCode ?? (signo === undefined ? (e.killed ? 137 : null) : 128 + signo)
    const truncated = exit?.type === "exit" && exit.outputTruncated
    return { ...base, status: "completed", exit_status: exitStatus, stdout: text("stdout"), stderr: text("stderr"), stdout_truncated: truncated, stderr_truncated: truncated }
  }

  const executeAsync = async (d: Devbox, request: Request) => {
    const body = await readBody(request, ExecuteAsync)
    if (body.shell_name != null) throw new HttpFailure(400, "persistent shells are not emulated")
    if (body.attach_stdin === true) throw new HttpFailure(400, "stdin is not emulated")
    if (d.status !== "running") throw new HttpFailure(400, `Devbox ${d.id} is ${d.status}, not running`)
    const started = await run(runtime.exec(d.id, {
      command: ["sh", "-c", body.command],
      cwd: "/workspace",
      env: d.environment,
      maxOutputBytes: MAX_OUTPUT_BYTES,
      stdin: false
    }))
    const e: Execution = { devboxId: d.id, executionId: newId("exe"), execId: started.execId, command: body.command, killed: false, createdAt: new Date().toISOString() }
    executions.set(e.executionId, e)
    books.prune()
    return json(await describe(d, e))
  }

  const kill = async (d: Devbox, executionId: string, request: Request) => {
    const e = executionOr404(d, executionId)
    await readBody(request, Kill)
    const info = await run(runtime.getExec(d.id, e.execId))
    if (info.state === "running") {
      e.killed = true
      executions.set(e.executionId, e)
      // The runtime's kill ends the command's whole process group.
      await run(runtime.kill(d.id, e.execId, "SIGKILL"))
    }
    return json(await describe(d, e, 1000))
  }

  /**
   * Every execution still running in the devbox ends (Runloop's suspend keeps no processes), and how each one
   * ended is kept: the frozen jail will not say.
   */
  const endAll = async (d: Devbox) => {
    for (const [, e] of executions.entries()) {
      if (e.devboxId !== d.id || e.final != null) continue
      const info = await run(runtime.getExec(d.id, e.execId)).catch(() => undefined)
      if (info === undefined) continue
      if (info.state === "running") {
        e.killed = true
        await run(runtime.kill(d.id, e.execId, "SIGKILL")).catch(() => undefined)
      }
      const ended = await describe(d, e, 2000).catch(() => undefined)
      if (ended?.status === "completed") {
        e.final = { exitStatus: ended.exit_status, stdout: ended.stdout ?? "", stderr: ended.stderr ?? "", truncated: ended.stdout_truncated === true }
      }
      executions.set(e.executionId, e)
    }
  }

  return {
    executeAsync,
    get: async (d: Devbox, executionId: string) => json(await describe(d, executionOr404(d, executionId), STATUS_WAIT_MS)),
    kill,
    endAll,
    dropDevbox: (d: Devbox) => {
      for (const [key, e] of executions.entries()) if (e.devboxId === d.id) executions.delete(key)
    }
  }
}
