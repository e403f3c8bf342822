/**
 * The Freestyle emulator's `POST /v5/vms/{id}/exec-await {command, timeoutMs?, env?, stdin?, linuxUser?}`, as
 * Freestyle's SDK sends it: the command is a shell line run with `sh -c` from `/workspace` in a running VM, with
 * `env` added; the request is held until it ends and answers `{stdout, stderr, statusCode}` (the exit code, or 128 +
 * the signal's number for one killed by a signal, as a shell reports it). `stdin` is base64 (at most 1 MiB),
 * written to the command's input and then closed. A command past `timeoutMs` (default 30 s; at most 300 s, the
 * limit of a VM without Freestyle's native exec agent: more is `AGENT_UNSUPPORTED`) is killed and answered with
 * `statusCode: null` and what it wrote. Commands run as the VM's one user (`user`, uid 1000): another
 * `linuxUser` is refused. Terminals are not emulated. The answer is whole, at most the 16 MiB of output the runtime
 * keeps.
 */
import { Schema } from "effect"
import * as os from "node:os"
import type { ExecEvent, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import type { Vm } from "./books.ts"
import { HttpFailure, json, readBody } from "./http.ts"

const MAX_TIMEOUT_MS = 300_000
const DEFAULT_TIMEOUT_MS = 30_000
/** The VM's default user (uid 1000): the only one there is here. */
const USER = "user"
const MAX_STDIN_BYTES = 1024 * 1024
/** What one command may keep of its output. */
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024

const ExecAwait = Schema.Struct({
  command: Schema.String.pipe(Schema.minLength(1)),
  terminal: Schema.optional(Schema.NullOr(Schema.String)),
  timeoutMs: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.between(0, 86_400_000)))),
  env: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String.pipe(Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]*$/)), value: Schema.String }))),
  linuxUser: Schema.optional(Schema.NullOr(Schema.String)),
  stdin: Schema.optional(Schema.NullOr(Schema.String))
})

export const makeExecAwait = (runtime: LocalRuntimeShape) => async (vm: Vm, request: Request) => {
  const body = await readBody(request, ExecAwait)
  if (body.terminal != null) throw new HttpFailure(400, "terminals are not emulated", "INVALID_PARAMETERS")
  if (body.linuxUser != null && body.linuxUser !== USER) throw new HttpFailure(400, `linuxUser ${body.linuxUser}: commands run as the VM's one user, ${USER}`, "INVALID_PARAMETERS")
  if ((body.timeoutMs ?? 0) > MAX_TIMEOUT_MS) throw new HttpFailure(400, `this VM's agent runs commands for at most ${MAX_TIMEOUT_MS} ms`, "AGENT_UNSUPPORTED")
  const timeoutMs = body.timeoutMs == null || body.timeoutMs === 0 ? DEFAULT_TIMEOUT_MS : body.timeoutMs
  const stdin = body.stdin == null ? null : Buffer.from(body.stdin, "base64")
  if (stdin !== null && stdin.length > MAX_STDIN_BYTES) throw new HttpFailure(400, `stdin is at most ${MAX_STDIN_BYTES} bytes`, "INVALID_PARAMETERS")
  const started = await run(runtime.exec(vm.id, {
    command: ["sh", "-c", body.command],
    cwd: "/workspace",
    env: { ...body.env },
    maxOutputBytes: MAX_OUTPUT_BYTES,
    timeoutMs,
    stdin: stdin !== null
  }))
  if (stdin !== null) await run(runtime.sendInput(vm.id, started.execId, stdin, true))
  const events: Array<ExecEvent> = []
  // The runtime wakes on the command's events; the exit is the last of them.
  while (events.at(-1)?.type !== "exit") {
    if (request.signal.aborted) {
      // The caller went away: Freestyle ends the command with the call.
      await run(runtime.kill(vm.id, started.execId, "SIGKILL")).catch(() => undefined)
      throw new HttpFailure(499, "the caller went away", "CLIENT_CLOSED")
    }
    events.push(...await run(runtime.execEvents(vm.id, started.execId, events.length, 1000)))
  }
  const exit = events.at(-1)
  const text = (type: "stdout" | "stderr") => Buffer.concat(events.flatMap((e) => (e.type === type ? [e.data] : []))).toString("utf8")
  const signo = exit?.type === "exit" && exit.signal !== null ? os.constants.signals[exit.signal as keyof typeof os.constants.signals] : undefined
  // Killed by its timeout: no status, as Freestyle answers it.
  const statusCode = exit?.type !== "exit" || exit.timedOut ? null : exit.exitCode ?? (signo === undefined ? null : 128 + signo)
  return json({ stdout: text("stdout"), stderr: text("stderr"), statusCode })
}
