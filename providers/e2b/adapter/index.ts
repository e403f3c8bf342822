/**
 * E2B adapter (reference/providers.md §3.2 "e2b"), speaking E2B's wire API through `HttpClient`:
 *
 * - Control API (`X-API-Key`), the routes E2B's SDK uses: `POST /v2/sandboxes`, `GET /sandboxes/{id}`,
 *   `GET /v2/sandboxes?metadata=…` (reconcile by our `metal.sandbox_id`), `DELETE /sandboxes/{id}`,
 *   `POST /sandboxes/{id}/pause`, `POST /v2/sandboxes/{id}/connect` (resumes a paused sandbox and returns a fresh
 *   envd access token), `POST /sandboxes/{id}/timeout`.
 * - envd (port 49983; `E2b-Sandbox-Id`, `E2b-Sandbox-Port`, `X-Access-Token`): Connect protocol with the JSON
 *   codec. `process.Process/Start` and `/Connect` are server streams; `List`, `SendSignal` and the
 *   `filesystem.Filesystem` calls are unary; `GET/POST /files` move bytes (Range reads, octet-stream or multipart
 *   uploads by envd version).
 *
 * envd addressing: `sandboxUrl` is either one host for every sandbox (requests carry `E2b-Sandbox-Id`, as the SDK
 * does for `https://sandbox.e2b.app`) or a host pattern with `{port}` and `{sandboxId}`
 * (`https://{port}-{sandboxId}.e2b.app`). The headers are sent either way.
 *
 * Processes: each execution is started with our process id as its envd `tag`, so it can be found again.
 * envd keeps no output for a client that is not attached, so this adapter reads each stream in the background
 * into a small per-execution buffer, which `execEvents` drains (events the caller acknowledged by asking from a
 * later seq are dropped). After a gateway restart (or a broken stream: a pause drops every envd connection) the
 * adapter re-attaches with `process.Process/Connect {tag}`:
 * - real envd then streams only what comes next: output written while nobody was attached is lost, and new
 *   events continue the sequence where the caller left off;
 * - a process that ended while nobody was attached is unknown to envd (it forgets finished processes), so its
 *   exit status is lost: `execEvents` fails with kind `not_found` (or reports the exit as cancelled when this
 *   adapter had cancelled it);
 * - the built-in emulator replays a process's output from the start and says so with the response header
 *   `x-e2b-emulator-replay: start`; the adapter then skips what it had already handed out, so nothing is lost.
 *
 * Cancel: the reference lists no cancel for E2B, but envd has `SendSignal`: cancel sends SIGTERM, then SIGKILL
 * after a grace period, so this adapter declares `process.cancel`. Timeouts: `Connect-Timeout-Ms` on Start makes
 * envd kill the process when it expires, even with nobody attached. No HTTP endpoints (`unsupported`).
 * Computer use (computer.ts): a sandbox asked for with `features.computer_use` is of E2B's `desktop` template (unless
 * the request names one), and its display is started at create and driven by envd commands, as E2B's Desktop SDK does.
 * Cost: E2B's rate card (14 µUSD per vCPU-second + 4.5 µUSD per GiB-second) over the window.
 */
import { Effect } from "effect"
import { withDesktop } from "../../core/desktop.ts"
import { makeProvider, type ProviderCalls } from "../../core/makeProvider.ts"
import { unsupported } from "../../../src/providers/Provider.ts"
import { withWorkspace } from "../../core/workspace.ts"
import { makeComputer } from "./computer.ts"
import { type E2BContext, type E2BProviderConfig, makeContext } from "./context.ts"
import { makeFiles } from "./files.ts"
import { makeProcesses } from "./processes.ts"
import { makeSandboxes } from "./sandboxes.ts"
import { NAME } from "./wire.ts"

export type { E2BProviderConfig } from "./context.ts"
export { E2B_CAPABILITIES, E2B_RATE_CARD, ENVD_PORT, envdAtLeast, envdBaseUrl, GO_SIGNAL_NAMES, REPLAY_HEADER, signalOfStatus } from "./wire.ts"

const e2bCalls = (ctx: E2BContext, config: E2BProviderConfig): ProviderCalls => {
  const processes = makeProcesses(ctx)
  const sandboxes = makeSandboxes(ctx, processes.forget)
  const computer = ctx.capabilities.computer == null ? undefined : makeComputer(ctx)
  const provider: ProviderCalls = {
    capabilities: ctx.capabilities,
    ...sandboxes,
    // Computer use: a desktop started at create when asked for (computer.ts).
    ...(computer === undefined ? {} : {
      create: withDesktop(NAME, sandboxes.create, sandboxes.destroy, computer, ctx.fail),
      destroy: (sandbox) => Effect.tap(sandboxes.destroy(sandbox), () => Effect.sync(() => computer.forget(sandbox.resourceId))),
      computer
    }),
    exec: processes.exec,
    execEvents: processes.execEvents,
    execNews: processes.execNews,
    execNewsAfterMs: 0,
    cancelExec: processes.cancelExec,
    sendInput: processes.sendInput,
    resizeTerminal: processes.resizeTerminal,
    ...makeFiles(ctx),
    exposeHttpEndpoint: () => Effect.fail(unsupported(NAME, "HTTP endpoints")),
    revokeHttpEndpoint: () => Effect.fail(unsupported(NAME, "HTTP endpoints"))
  }
  return withWorkspace(provider, config.workspaceDir ?? (config.mode === "emulated" ? "/workspace" : "/home/user"))
}

export const makeE2BProvider = makeProvider(NAME, {
  context: makeContext,
  calls: e2bCalls,
  // BYOK: the organization's API key, against the same control API and envd.
  byok: (config) => (credentials) => ({ ...config, apiKey: credentials["api_key"] ?? "" })
})
