/**
 * The side of an SDK contract test that runs inside the offline namespace (test/support/offline.ts): a flow script
 * drives a provider's official SDK through named steps and reports them as one JSON line, the last of its stdout.
 *
 *   import { emulatorOf, runFlow } from "./flow.ts"
 *   await runFlow(async ({ step, skip }) => {
 *     const sandbox = await step("create", () => Sandbox.create())       // a thrown error fails the step and ends the flow
 *     skip("metrics", "the emulator does not serve E2B's metrics")        // named, with the reason
 *   })
 *
 * The SDK finds the emulators through the environment `emulate` printed for it (set by the harness), and
 * `emulatorOf(provider)` gives a flow the rest (base URLs, API key) for SDK options. Exit status: 0 when every step
 * passed or was skipped, 1 otherwise.
 */
import type { ServedEmulator } from "../../providers/emulatorCatalog.ts"

export type StepResult =
  | { readonly name: string; readonly status: "passed" }
  | { readonly name: string; readonly status: "failed"; readonly error: string }
  | { readonly name: string; readonly status: "skipped"; readonly reason: string }

export interface FlowReport {
  readonly ok: boolean
  readonly steps: ReadonlyArray<StepResult>
}

export interface Flow {
  /** Runs one step; its failure is recorded with its message and ends the flow. */
  readonly step: <A>(name: string, run: () => Promise<A> | A) => Promise<A>
  /** Records a step the flow does not run here, and why. */
  readonly skip: (name: string, reason: string) => void
}

export type EmulatorInfo = Omit<ServedEmulator, "stop">

/** The emulator `emulate` serves for `provider` in this run (from OFFLINE_EMULATORS, set by the harness). */
export const emulatorOf = (provider: string): EmulatorInfo => {
  const all = JSON.parse(process.env["OFFLINE_EMULATORS"] ?? "[]") as Array<EmulatorInfo>
  const found = all.find((e) => e.provider === provider)
  if (found === undefined) throw new Error(`no ${provider} emulator in this run (OFFLINE_EMULATORS)`)
  return found
}

/** The message of a thrown value, with its class name (SDK errors say what they are by their class). */
export const describeError = (e: unknown): string =>
  e instanceof Error ? `${e.constructor.name}: ${e.message}${e.cause instanceof Error ? ` (cause: ${e.cause.message})` : ""}` : String(e)

class StepFailed extends Error {}

/** Runs the flow, prints its report as the last line of stdout and exits with its status. */
export const runFlow = async (body: (flow: Flow) => Promise<void>): Promise<never> => {
  const steps: Array<StepResult> = []
  const flow: Flow = {
    step: async (name, run) => {
      try {
        const value = await run()
        steps.push({ name, status: "passed" })
        return value
      } catch (e) {
        steps.push({ name, status: "failed", error: describeError(e) })
        throw new StepFailed(name)
      }
    },
    skip: (name, reason) => void steps.push({ name, status: "skipped", reason })
  }
  try {
    await body(flow)
  } catch (e) {
    if (!(e instanceof StepFailed)) steps.push({ name: "(outside any step)", status: "failed", error: describeError(e) })
  }
  const report: FlowReport = { ok: steps.every((s) => s.status !== "failed"), steps }
  process.stdout.write(`\n${JSON.stringify(report)}\n`)
  process.exit(report.ok ? 0 : 1)
}
