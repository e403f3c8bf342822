/**
 * Writing to a process's standard input (`POST …/processes/{id}/stdin`). Written from the request, not from a
 * job: the bytes go to the provider while the client waits, so a 202 means they were handed to the process's
 * input, and a failure is the client's to see and retry. Writes to one process are made one at a time, in the
 * order they reach this gateway (a FIFO lock per process), so a client that sends its next write after the
 * previous answer has its input in order. `eof` closes the input after the data; nothing may be written after it.
 * A terminal's attach (Terminals.ts) types through the same path.
 */
import { Effect } from "effect"
import { Db } from "../../db/Db.ts"
import { ProcessesRepo } from "../../db/repos/Processes.ts"
import { apiError, type Coded, type Conflict, conflict, ServiceUnavailable } from "../../domain/Errors.ts"
import { nowIso } from "../../domain/Time.ts"
import { type SandboxRow, SandboxesRepo } from "../../db/repos/Sandboxes.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import { nextSignal, processTopic, publish } from "../Signals.ts"
import { processOf } from "./ProcessCommands.ts"
import { type Caller, sandboxOf } from "./SandboxAccess.ts"
import { TERMINAL_PROCESS_STATES } from "./Processes.ts"
import { actionFailure, logProviderFailure } from "./ProviderErrors.ts"
import { keyedSerial } from "../../domain/KeyedSerial.ts"
import type { ProcessId, SandboxId } from "../../domain/Ids.ts"

/** How long a write waits for a queued process to start at its provider. */
const START_WAIT_MS = 10_000

/** One chain of pending writes per process: each write runs after the one before it, whatever their outcome. */
const writes = keyedSerial()
const inOrder = <A, E>(processId: ProcessId, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.flatten(Effect.promise(() => writes.run(processId, () => Effect.runPromiseExit(effect))))

const ended = (state: string) => conflict("invalid_process_state", `The process is ${state}: its input is closed`, { state })

/**
 * Writes to the input of a process (or types into its terminal), in order with the other writes to it. `eof`
 * closes a plain input after the data (nothing may be written after it); on a terminal it types ^D, the end of
 * input for the program reading it, and the terminal stays open.
 */
export const sendInput = (sandbox: SandboxRow, processId: ProcessId, data: Uint8Array, eof: boolean) =>
  Effect.gen(function*() {
    const target = (yield* ProviderAccounts).target(sandbox)
    const send = target?.provider.sendInput
    if (target === undefined || send === undefined) return yield* conflict("invalid_sandbox_state", `The sandbox is ${sandbox.state}; its processes cannot take input`)
    let row = (yield* ProcessesRepo.get(processId))!
    // A queued process has no execution at its provider yet: wait (briefly) for it to start.
    const deadline = Date.now() + START_WAIT_MS
    while (row.execution_id === null && !TERMINAL_PROCESS_STATES.includes(row.state) && Date.now() < deadline) {
      yield* nextSignal(processTopic(processId), Math.min(200, deadline - Date.now()))
      row = (yield* ProcessesRepo.get(processId))!
    }
    return yield* inOrder(processId, Effect.gen(function*() {
      const now = (yield* ProcessesRepo.get(processId))!
      if (now.stdin_closed_at !== null) return yield* conflict("invalid_process_state", "The process's input was closed (eof)", { state: now.state })
      if (TERMINAL_PROCESS_STATES.includes(now.state)) return yield* ended(now.state)
      if (now.execution_id === null) return yield* conflict("invalid_process_state", "The process has not started yet; try again", { state: now.state })
      yield* send(target.resource, now.execution_id, data, eof).pipe(
        Effect.tapError((e) => logProviderFailure("stdin", e)),
        Effect.catchAll((e) =>
          Effect.flatMap(ProcessesRepo.get(processId), (latest): Effect.Effect<never, Coded<Conflict, "invalid_process_state"> | Coded<ServiceUnavailable, "stdin_write_failed">> => {
            // Gone at the provider because it ended meanwhile: the input is closed, as for an ended process.
            if (latest !== undefined && TERMINAL_PROCESS_STATES.includes(latest.state)) return Effect.fail(ended(latest.state))
            const error = actionFailure("stdin_write_failed", "write to the process's input", e)
            return e.kind === "not_found" || e.kind === "customer" || e.kind === "invalid_request"
              ? Effect.fail(conflict("invalid_process_state", "The process no longer takes input", { reason: error.details?.["reason"] }))
              : Effect.fail(apiError(ServiceUnavailable, error.code, error.message, error.details))
          }))
      )
      if (eof && now.pty_cols === null) yield* ProcessesRepo.closeStdin(processId, yield* nowIso)
      // The process's job polls for what the input makes it write at once, however long it was quiet.
      yield* publish(processTopic(processId))
      yield* SandboxesRepo.touch(sandbox.id)
      return { process_id: processId, bytes_written: data.length, eof }
    }).pipe(Effect.provide(yield* Effect.context<ProcessesRepo | SandboxesRepo | Db>())))
  })

export const writeStdin = (caller: Caller, sandboxId: SandboxId, processId: ProcessId, data: Uint8Array, eof: boolean) =>
  Effect.gen(function*() {
    const sandbox = yield* sandboxOf(caller, sandboxId)
    const row = yield* processOf(caller, sandboxId, processId)
    if (!row.stdin) return yield* conflict("invalid_process_state", "The process was not started with \"stdin\": true", { state: row.state })
    return yield* sendInput(sandbox, processId, data, eof)
  }).pipe(Effect.withSpan("Stdin.writeStdin", { attributes: { "sandbox.id": sandboxId, "project.id": caller.projectId } }))
