/**
 * Daytona adapter (reference/providers.md §3.2 "daytona"), speaking Daytona's REST API through `HttpClient`
 * with a Bearer key. Wire facts are from the API and toolbox clients of Daytona's SDK (0.218) and its daemon's last public source (v0.190).
 *
 * Control API (`baseUrl`, e.g. https://app.daytona.io/api):
 * - `POST /sandbox` {name: "metal-<sandbox id>", labels (ours: metal.sandbox_id / metal.project_id /
 *   metal.organization_id, plus the request's metadata), env, public: false, networkBlockAll, autoStopInterval: 0
 *   (never stop on idle: the gateway runs its own timers), autoDeleteInterval: -1, target?}. Environment sources
 *   use a snapshot (`DAYTONA_SNAPSHOT`, else Daytona's default) and send no resources: the snapshot sizes the
 *   sandbox. OCI images use a declarative build (`buildInfo.dockerfileContent: "FROM <image>"`) with cpu,
 *   memory (GiB) and disk (GiB) rounded up to whole units. The answer is polled (`GET /sandbox/{id}`) until
 *   `started`; `build_failed`/`error` destroy it and fail as `customer`.
 *   Not `ephemeral`: upstream that means autoDeleteInterval 0, i.e. deleted on stop, and stop is our pause.
 * - `GET /sandbox?labels={"metal.sandbox_id":…}` (a page `{items, nextCursor}`) finds the resource after an unknown
 *   outcome (then read whole: a list item lacks its build info); `GET` and `DELETE /sandbox/{id}`; `POST
 *   /sandbox/{id}/stop` and `/start` are pause and resume (polled until `stopped` / `started`).
 * - `GET /sandbox/{id}/ports/{port}/signed-preview-url?expiresInSeconds=` gives {token, url}; the lease id is
 *   `<port>:<token>`; `POST …/signed-preview-url/{token}/expire` revokes it (Daytona answers 200 whether or not
 *   the token was live).
 *
 * Toolbox (`<toolboxProxyUrl>/<sandbox id>`):
 * - exec: one session per process (`POST /process/session {sessionId: "metal-<process id>"}`), one async command
 *   in it (`POST /process/session/{s}/exec {command, runAsync: true, suppressInputEcho: true}` → {cmdId}), then an
 *   `exit 0` queued behind it, so the session's shell ends with the command (no idle shell per process is left
 *   in the sandbox; the session and its logs stay). Create is idempotent: an existing session's command is reused.
 *   The execution id is `daytona:` + base64url(JSON [session, command, max output bytes]), so `execEvents` needs
 *   no memory and works after a gateway restart.
 * - where it starts: its cwd; without one, an environment sandbox's workspace, and an image sandbox's own
 *   WorkingDir (no cd: the sandbox's build info says it runs an image, kept in its metadata).
 * - standard input: none (`< /dev/null`) unless asked for; then a decoder in front of the command reads lines of
 *   octal escapes from the session command's input (`POST …/command/{c}/input {data}`: text only, a newline added,
 *   no end-of-file) and writes the bytes to it; a line `E` ends its input (processes.ts).
 * - events: `GET …/command/{c}` (exitCode once done) and `GET …/command/{c}/logs` with
 *   `X-Daytona-Split-Output: true` and no SDK version header, which makes the daemon answer the raw log: each
 *   piece of output prefixed by \x01\x01\x01 (stdout) or \x02\x02\x02 (stderr), in the order written (at most four
 *   times the max output bytes of it are read). Events are those pieces in order — a pure function of the log, so
 *   every call (and every restart) numbers them the same. While the command runs, a last piece is handed out only
 *   once complete (it ends in a newline — the daemon writes whole lines — or another piece follows). A JSON
 *   {stdout, stderr} answer (newer daemons with an SDK header) is accepted too: stdout then stderr, after the exit.
 *   Output beyond the process's max_output_bytes is dropped and the exit says `outputTruncated`. Logs are re-read
 *   at most every `logPollMs` while running.
 * - cancel: `DELETE /process/session/{s}` (the daemon sends SIGTERM, then SIGKILL, to the whole group). The
 *   session is then gone, so the exit is reported as cancelled (exit code null) at the caller's position. A
 *   command that already exited is not cancelled (its real exit is kept).
 * - timeout: Daytona's sessions have none, and wrapping the command in `timeout` would move it out of the
 *   process group that a cancel signals (and make exit 124 ambiguous), so the caller's deadline applies: the
 *   gateway cancels a process at its timeout, also after a restart.
 * - terminals (`pty` processes; terminals.ts): a PTY session each (`POST /process/pty {id: "metal-<process id>",
 *   cols, rows, lazyStart: true}`), driven over `GET /process/pty/{id}/connect` (a WebSocket: raw bytes both ways,
 *   a control message first, the exit in the close), `POST …/resize`, and `DELETE` as cancel. A PTY session runs
 *   only the user's shell, so the adapter types into it a line that prints a marker (not contained in the typed
 *   line: printf joins its halves) and then `exec`s the command — whose exit is then the session's — and drops the
 *   output up to the marker's line, bounded in bytes and time. The execution id is `daytona-pty:` +
 *   base64url(JSON [session, max output bytes]). Input (`sendInput`) goes into the terminal.
 * - files: `GET /files/info`, `GET /files/download` (with Range), `POST /files/upload-v2` (the raw body; a stream
 *   as it comes), `POST /files/folder`, `GET /files`, `DELETE /files?recursive=`. Daytona's upload creates parents
 *   itself, so `createParents: false` checks the parent first. Append is not offered (read-modify-write would race).
 *
 * - computer use (computer.ts): `/computeruse/start` at create when the request asks for it, then the mouse,
 *   keyboard, screenshot and recording routes of the daemon's computer-use API.
 *
 * Paths: the gateway's `/workspace` is where sandboxes keep their work. A Daytona sandbox's user cannot write
 * `/workspace`, so in `remote` mode `/workspace/…` maps to the home-relative `workspace/…` (as the reference
 * does; `withWorkspace` rewrites paths and working directories both ways) and commands start there; the
 * emulator's sandboxes really have `/workspace`, so `emulated` maps nothing.
 *
 * Capabilities: the Daytona row of reference §3.1 (with standard input) plus pause/resume, the internet switch and terminals. Pause is off by
 * default upstream because stop/start is not a memory-preserving pause: stop ends every process (and session)
 * and keeps the filesystem, start boots it again. We declare both anyway — the filesystem survives, which is
 * what the API's pause/resume promises, and auto routing needs a provider that can pause — and the emulator
 * does what Daytona does (processes end at stop). `networkBlockAll` keeps a sandbox off the internet.
 *
 * Cost: an estimate from Daytona's published per-second prices (DAYTONA_RATE_CARD: 14 µUSD per vCPU-second,
 * 4.5 µUSD per GiB-second of memory, 0.03 µUSD per GiB-second of disk beyond the 5 free GiB) over the window,
 * provenance `estimated_rate_card`, confidence low (stopped time is counted as running).
 */
import { Effect } from "effect"
import { withDesktop } from "../../core/desktop.ts"
import { makeProvider, type ProviderCalls } from "../../core/makeProvider.ts"
import { withWorkspace } from "../../core/workspace.ts"
import { makeComputer } from "./computer.ts"
import { makeEndpoints } from "./endpoints.ts"
import { makeFiles } from "./files.ts"
import { makeProcesses } from "./processes.ts"
import { makeSandboxes } from "./sandboxes.ts"
import { type DaytonaContext, type DaytonaProviderConfig, makeContext, NAME } from "./wire.ts"

export {
  DAYTONA_CAPABILITIES,
  DAYTONA_RATE_CARD,
  type DaytonaProviderConfig,
  demuxLog,
  eventsFromPieces,
  executionIds,
  LABEL_SANDBOX_ID,
  sandboxName,
  sessionName,
  shellQuote,
  STDERR_MARKER,
  STDOUT_MARKER,
  terminalIds
} from "./wire.ts"

const daytonaCalls = (ctx: DaytonaContext, config: DaytonaProviderConfig): ProviderCalls => {
  const sandboxes = makeSandboxes(ctx)
  const { forgetTerminals, ...processes } = makeProcesses(ctx)
  const computer = ctx.capabilities.computer == null ? undefined : makeComputer(ctx)
  return withWorkspace({
    capabilities: ctx.capabilities,
    ...sandboxes,
    // Computer use: a desktop started at create when asked for (computer.ts).
    ...(computer === undefined ? {} : { create: withDesktop(NAME, sandboxes.create, sandboxes.destroy, computer, ctx.fail), computer }),
    // A destroyed sandbox's terminals are forgotten with it.
    destroy: (sandbox) => Effect.tap(sandboxes.destroy(sandbox), () => Effect.sync(() => forgetTerminals(sandbox.resourceId))),
    ...processes,
    ...makeFiles(ctx),
    ...makeEndpoints(ctx)
  }, ctx.workspaceDir)
}

export const makeDaytonaProvider = makeProvider(NAME, {
  context: makeContext,
  calls: daytonaCalls,
  // BYOK: the organization's key (and, for a key of several organizations, which one; and its region).
  byok: (config) => (credentials) => ({
    ...config,
    apiKey: credentials["api_key"] ?? "",
    organizationId: credentials["organization_id"],
    target: credentials["target"] ?? config.target
  })
})
