/**
 * The local runtime (ARCHITECTURE.md §5): isolated sandboxes on this host, behind every provider emulator.
 *
 * This file is the contract between the runtime (src/runtime/*) and its users (the provider emulators in
 * providers/<name>/emulator.ts, the gateway's reverse proxy and tests). Every operation is idempotent where the
 * comment says so. Sandboxes outlive the gateway process: the runtime re-attaches to running jails on start.
 */
import { Context, Data, type Effect, type Option } from "effect"
import type * as net from "node:net"

export class RuntimeError extends Data.TaggedError("RuntimeError")<{
  /**
   * not_found: no such sandbox / process / file; conflict: wrong state (e.g. exec while paused) or the path
   * exists with mode `create`; invalid: bad argument (path escapes the jail, not a directory, ...);
   * unavailable: the jail is gone or its agent does not answer; image_pull_failed: the sandbox's image could not
   * be pulled (the message says which image and why: unknown image or tag, registry unreachable, wrong
   * platform, too large, digest mismatch, unsafe layer); internal: anything else.
   */
  readonly kind: "not_found" | "conflict" | "invalid" | "unavailable" | "image_pull_failed" | "internal"
  /** In the user's terms: what failed, never a host path, a stack or the runtime's internals. */
  readonly message: string
  /** For the operator's log only (e.g. bwrap's own error when a jail does not start); never shown to users. */
  readonly detail?: string | undefined
}> {}

/** A RuntimeError: `message` for the user, `detail` (optional) for the operator's log. */
export const runtimeError = (kind: RuntimeError["kind"], message: string, detail?: string) =>
  new RuntimeError({ kind, message, ...(detail !== undefined ? { detail } : {}) })

export interface RuntimeSandboxSpec {
  /** Caller-chosen id (the emulator's resource id); `create` is idempotent on it. */
  readonly id: string
  readonly vcpu: number
  readonly memoryMb: number
  /**
   * The sandbox's disk, its own filesystem (root, /workspace, /tmp, kept process output): writes beyond it fail
   * with ENOSPC inside. 32 MB to 1 TiB; default 10240.
   */
  readonly diskMb?: number | undefined
  /**
   * false: no network at all beyond the sandbox's own loopback. true: slirp4netns, and an egress filter keeps the
   * host (every address of it), link-local and metadata addresses, and private ranges (unless the operator
   * allows them) unreachable.
   */
  readonly internet: boolean
  /**
   * With internet only (ignored without: the sandbox has no network at all): the names it may resolve and so
   * reach. `allow`: only these names (`*.example.com`: its subdomains); `deny`: every name but these. Names
   * resolve only through a DNS forwarder of the runtime that applies the policy (NXDOMAIN outside it), and
   * connections go only to addresses an allowed name resolved to (for the answer's TTL, at least a minute): a
   * literal IP no allowed name resolved to is refused, and an allowed name resolving to a private or host
   * address still meets the egress filter. At most 256 names.
   */
  readonly domains?: RuntimeDomainPolicy | undefined
  /** Default environment of every process. */
  readonly env?: Readonly<Record<string, string>> | undefined
  /** Free labels kept with the sandbox (emulators store their own metadata here). */
  readonly labels?: Readonly<Record<string, string>> | undefined
  /**
   * Run the sandbox on this OCI image instead of the host's minimal system: its layers (pulled through the
   * registry's API, cached under DATA_DIR, read-only) under a writable layer of the sandbox's own on its disk.
   * The image config applies as a container runtime applies it: Env (under `env`; HOME from the User's
   * /etc/passwd entry under both), WorkingDir (the default cwd; / when it names none), User (every process runs
   * as it inside; root when it names none) and Entrypoint/Cmd (RuntimeImageSpec.command). A pull that fails, or a
   * User the image does not have, fails the create with kind `image_pull_failed`; the sandbox never runs on
   * anything else.
   */
  readonly image?: RuntimeImageSpec | undefined
}

export interface RuntimeDomainPolicy {
  readonly mode: "allow" | "deny"
  /** `example.com` (that name) or `*.example.com` (its subdomains at any depth, not example.com itself). */
  readonly domains: ReadonlyArray<string>
}

export interface RuntimeImageSpec {
  /** `alpine:3.20`, `docker.io/library/alpine@sha256:…`, `127.0.0.1:5000/team/app:1` (plain HTTP on loopback only). */
  readonly reference: string
  /** `os/arch[/variant]`; default this host's. Another architecture than the host's fails (it could not run). */
  readonly platform?: string | undefined
  /**
   * What is started once the sandbox runs, as `docker run` starts a container: the image's Entrypoint followed by
   * these arguments, or (none given, or an empty list) by its Cmd — in its WorkingDir, as its User, with its Env.
   * Nothing is started when both are empty. It runs once: its exit does not stop the sandbox. Its output is kept
   * as the execution tagged `image-command`.
   */
  readonly command?: ReadonlyArray<string> | undefined
  /** true: nothing is started, whatever the image's Entrypoint and Cmd (an emulated provider that idles instead). */
  readonly idle?: boolean | undefined
}

export interface RuntimeSandbox {
  readonly id: string
  readonly state: "running" | "paused" | "stopped"
  readonly createdAt: string
  readonly labels: Readonly<Record<string, string>>
  /** What was really applied: cgroup limits, or rlimits where cgroups are not available. */
  readonly applied: { readonly vcpu: number; readonly memoryMb: number; readonly diskMb: number; readonly mechanism: "cgroup" | "rlimit" }
  /**
   * The image the sandbox runs on (its manifest digest pins what was pulled), when it was created from one, and
   * the default cwd of its processes (its WorkingDir, or /).
   */
  readonly image?: { readonly reference: string; readonly digest: string; readonly platform: string; readonly workingDir: string } | undefined
}

export interface ExecSpec {
  readonly command: ReadonlyArray<string>
  /** Absolute path inside the sandbox; default the image's WorkingDir, or / (sandboxes from an image), else /workspace. */
  readonly cwd?: string | undefined
  readonly env?: Readonly<Record<string, string>> | undefined
  /** Killed (SIGTERM, then SIGKILL after a grace period) when exceeded. */
  readonly timeoutMs?: number | undefined
  /** Output beyond this many bytes (stdout + stderr together) is dropped and the exit marks it truncated. */
  readonly maxOutputBytes: number
  /** Optional caller tag, e.g. the provider's session/command id; `exec` is idempotent on (sandbox, tag). */
  readonly tag?: string | undefined
  /** false: the command reads end-of-file at once; otherwise its stdin is a pipe written with `sendInput`. */
  readonly stdin?: boolean | undefined
  /**
   * Run the command on a pseudo-terminal of this size (its controlling terminal): its output (stdout and stderr
   * together, as a terminal shows them) comes as `stdout` events, `sendInput` types into it (`close` sends
   * end-of-transmission, ^D) and `resize` changes its size. `stdin` is ignored then.
   */
  readonly pty?: TerminalSize | undefined
}

/** Columns and rows of a pseudo-terminal, each 1–1000. */
export interface TerminalSize {
  readonly cols: number
  readonly rows: number
}

/** Ordered events of one execution; `seq` is contiguous from 0 and `exit` is always last. */
export type ExecEvent =
  | { readonly seq: number; readonly type: "stdout" | "stderr"; readonly data: Uint8Array }
  | {
    readonly seq: number
    readonly type: "exit"
    readonly exitCode: number | null
    /** e.g. "SIGKILL" when killed by a signal. */
    readonly signal: string | null
    readonly cancelled: boolean
    readonly timedOut: boolean
    readonly outputTruncated: boolean
  }

export interface ExecInfo {
  readonly execId: string
  readonly tag: string | null
  readonly pid: number
  readonly state: "running" | "exited"
  readonly startedAt: string
  readonly exitCode: number | null
}

export interface FileRead {
  readonly data: Uint8Array
  readonly offset: number
  readonly size: number
  readonly eof: boolean
}

export interface FileEntry {
  /** Absolute path inside the sandbox. */
  readonly path: string
  readonly type: "file" | "directory" | "symlink" | "other"
  readonly sizeBytes: number
  readonly modifiedAt: string
  readonly mode: number
}

/** A running sandbox's consumption; null where this host does not count it. */
export interface RuntimeMetrics {
  readonly collectedAt: string
  /** CPU time of everything in the sandbox since it started. */
  readonly cpuSeconds: number | null
  /** Memory of the sandbox's commands now, at most since it started, and their limit. */
  readonly memoryBytes: number | null
  readonly memoryPeakBytes: number | null
  readonly memoryLimitBytes: number | null
  /** Used and total bytes of the sandbox's disk. */
  readonly diskBytes: number | null
  readonly diskLimitBytes: number | null
  /** Bytes in and out through its network interface (0 without internet: it has only loopback). */
  readonly networkRxBytes: number | null
  readonly networkTxBytes: number | null
  /** Tasks (processes and threads) of its commands. */
  readonly processCount: number | null
}

/** An input action on a sandbox's desktop (the API's computer actions, already validated). */
export type DesktopAction =
  | { readonly type: "mouse_move"; readonly x: number; readonly y: number }
  | { readonly type: "mouse_click"; readonly x: number; readonly y: number; readonly button: "left" | "right" | "middle"; readonly double: boolean }
  | { readonly type: "mouse_drag"; readonly start_x: number; readonly start_y: number; readonly end_x: number; readonly end_y: number; readonly button: "left" | "right" | "middle" }
  | { readonly type: "mouse_scroll"; readonly direction: "up" | "down"; readonly amount: number; readonly x?: number | undefined; readonly y?: number | undefined }
  | { readonly type: "keyboard_type"; readonly text: string; readonly delay_ms: number }
  | { readonly type: "keyboard_key"; readonly key: string; readonly modifiers: ReadonlyArray<"ctrl" | "alt" | "shift" | "cmd"> }
  | { readonly type: "keyboard_hotkey"; readonly keys: string }

export interface DesktopInfo {
  readonly width: number
  readonly height: number
  /** The sandbox port its live view (noVNC) serves on, for an endpoint; null where the host has no VNC server or noVNC. */
  readonly liveViewPort: number | null
}

export interface ScreenshotSpec {
  readonly format: "png" | "jpeg"
  /** JPEG quality 1–100 (default 85). */
  readonly quality?: number | undefined
  /** 0.1–1 (default 1). */
  readonly scale?: number | undefined
  readonly showCursor: boolean
  readonly region?: { readonly x: number; readonly y: number; readonly width: number; readonly height: number } | undefined
}

export interface Screenshot {
  readonly format: "png" | "jpeg"
  /** Checked: a PNG or JPEG (by its signature) of at most SCREENSHOT_MAX_BYTES. */
  readonly data: Uint8Array
  readonly width: number
  readonly height: number
  readonly cursor: { readonly x: number; readonly y: number }
}

export interface DesktopRecording {
  readonly id: string
  readonly state: "starting" | "recording" | "stopping" | "stopped" | "failed"
  readonly startedAt: string
  readonly stoppedAt: string | null
  readonly sizeBytes: number | null
  readonly durationSeconds: number
  /** Where the mp4 is inside the sandbox (built from the id, never taken from the agent's answer). */
  readonly path: string
}

/** How a pull goes: the image resolved (its layers and compressed size), then each layer fetched or found cached. */
export type ImagePullProgress =
  | { readonly phase: "resolved"; readonly digest: string; readonly layers: number; readonly bytes: number }
  | { readonly phase: "layer"; readonly digest: string; readonly cached: boolean; readonly bytes: number }

/** The largest sandbox this host can give. */
export interface RuntimeLimits {
  readonly vcpu: number
  readonly memoryMb: number
  readonly diskMb: number
}

export interface LocalRuntimeShape {
  /** Idempotent on spec.id: a second call returns the existing sandbox. */
  readonly create: (spec: RuntimeSandboxSpec) => Effect.Effect<RuntimeSandbox, RuntimeError>
  readonly get: (id: string) => Effect.Effect<Option.Option<RuntimeSandbox>, RuntimeError>
  readonly list: Effect.Effect<ReadonlyArray<RuntimeSandbox>, RuntimeError>
  /** Kills every process, removes the jail, its mounts, cgroups and files. Idempotent. */
  readonly destroy: (id: string) => Effect.Effect<void, RuntimeError>
  /** Freezes every process of the sandbox. Idempotent. */
  readonly pause: (id: string) => Effect.Effect<void, RuntimeError>
  readonly resume: (id: string) => Effect.Effect<void, RuntimeError>
  /**
   * Pulls an image into the layer cache (or finds it there), telling `onProgress` how it goes; a create from the
   * same image then finds its layers cached. Fails `image_pull_failed` saying which image and why.
   */
  readonly pullImage: (reference: string, platform: string | undefined, onProgress: (progress: ImagePullProgress) => void) => Effect.Effect<{ readonly digest: string }, RuntimeError>
  /** What the sandbox consumes now (also while paused). */
  readonly metrics: (id: string) => Effect.Effect<RuntimeMetrics, RuntimeError>

  readonly exec: (id: string, spec: ExecSpec) => Effect.Effect<ExecInfo, RuntimeError>
  readonly getExec: (id: string, execId: string) => Effect.Effect<ExecInfo, RuntimeError>
  /** Events with seq >= fromSeq; when `wait` and none are there yet, waits up to `wait` ms for some. */
  readonly execEvents: (
    id: string,
    execId: string,
    fromSeq: number,
    wait?: number
  ) => Effect.Effect<ReadonlyArray<ExecEvent>, RuntimeError>
  /** SIGTERM (or the given signal), then SIGKILL after a grace period. Idempotent once exited. */
  readonly kill: (id: string, execId: string, signal?: string) => Effect.Effect<void, RuntimeError>
  /** Writes to the process's stdin (or its terminal); `close` closes it (on a terminal: sends ^D). */
  readonly sendInput: (id: string, execId: string, data: Uint8Array, close?: boolean) => Effect.Effect<void, RuntimeError>
  /** Resizes the terminal of a process started with `pty` (the process gets SIGWINCH); `invalid` for any other. */
  readonly resize: (id: string, execId: string, size: TerminalSize) => Effect.Effect<void, RuntimeError>

  /** Paths are absolute inside the sandbox and resolved inside the jail: no `..` or symlink ever leaves it. */
  readonly readFile: (id: string, path: string, offset: number, limit: number) => Effect.Effect<FileRead, RuntimeError>
  /**
   * Up to `limit` bytes from `offset`, handed on as they come from the agent (memory flat whatever the size):
   * `length` is what the stream carries, exactly, or it errors (the file changed meanwhile, or the agent lied).
   */
  readonly readFileStream: (
    id: string,
    path: string,
    offset: number,
    limit: number
  ) => Effect.Effect<{ readonly size: number; readonly length: number; readonly stream: ReadableStream<Uint8Array> }, RuntimeError>
  readonly writeFile: (
    id: string,
    path: string,
    data: Uint8Array,
    options: { readonly mode: "create" | "overwrite" | "append"; readonly createParents: boolean }
  ) => Effect.Effect<{ readonly bytesWritten: number; readonly created: boolean }, RuntimeError>
  /**
   * Writes a body as it comes (memory stays flat whatever its size): it is received beside the path and takes the
   * path's place only once whole, so a body that breaks off (or passes `maxBytes`: `invalid`) changes nothing.
   */
  readonly writeFileStream: (
    id: string,
    path: string,
    body: ReadableStream<Uint8Array>,
    options: { readonly mode: "create" | "overwrite" | "append"; readonly createParents: boolean; readonly maxBytes: number }
  ) => Effect.Effect<{ readonly bytesWritten: number; readonly created: boolean }, RuntimeError>
  readonly statFile: (id: string, path: string) => Effect.Effect<Option.Option<FileEntry>, RuntimeError>
  readonly listFiles: (
    id: string,
    path: string,
    options: { readonly recursive: boolean; readonly maxEntries: number }
  ) => Effect.Effect<{ readonly entries: ReadonlyArray<FileEntry>; readonly truncated: boolean }, RuntimeError>
  /** Returns false when the path did not exist. */
  readonly deleteFile: (id: string, path: string, options: { readonly recursive: boolean }) => Effect.Effect<boolean, RuntimeError>
  readonly makeDir: (id: string, path: string, options: { readonly parents: boolean }) => Effect.Effect<void, RuntimeError>

  /**
   * The sandbox's desktop (computer use), run by its agent inside the jail: a display of this size with a window
   * manager (idempotent: a running desktop is answered as it is). `conflict` where the sandbox's system has no X
   * server (a sandbox on an OCI image that brings none).
   */
  readonly startDesktop: (id: string, size: { readonly width: number; readonly height: number }) => Effect.Effect<DesktopInfo, RuntimeError>
  /** The running desktop, or None. */
  readonly desktop: (id: string) => Effect.Effect<Option.Option<DesktopInfo>, RuntimeError>
  /** One input action, after every one before it; answers where the pointer is afterwards. */
  readonly desktopAction: (id: string, action: DesktopAction) => Effect.Effect<{ readonly cursor: { readonly x: number; readonly y: number } }, RuntimeError>
  readonly screenshot: (id: string, spec: ScreenshotSpec) => Effect.Effect<Screenshot, RuntimeError>
  /** Starts recording the desktop to an mp4 inside the sandbox (on its disk, so it counts against it). */
  readonly startRecording: (id: string) => Effect.Effect<DesktopRecording, RuntimeError>
  readonly recording: (id: string, recordingId: string) => Effect.Effect<DesktopRecording, RuntimeError>
  readonly listRecordings: (id: string) => Effect.Effect<ReadonlyArray<DesktopRecording>, RuntimeError>
  /** Ends the recording: its mp4 is then whole (read it with readFile/readFileStream at `path`). */
  readonly stopRecording: (id: string, recordingId: string) => Effect.Effect<DesktopRecording, RuntimeError>

  /**
   * A byte stream to 127.0.0.1:port inside the sandbox (the port bridge), for the reverse proxy. The socket is
   * handed over paused (no byte can be emitted before the caller listens): `pipe` it, or `resume()` it after
   * attaching a "data" listener. Fails `unavailable` when nothing listens on the port.
   */
  readonly connectPort: (id: string, port: number) => Effect.Effect<net.Socket, RuntimeError>

  /**
   * Destroys every jail under this DATA_DIR whose id is not in `keepIds` (the gateway's records), also one whose
   * directory is gone but whose processes or cgroups remain; warm jails of this runtime are kept. Returns the
   * reaped ids. Optional so that test doubles need not implement it; the real runtime always has it.
   */
  readonly reap?: ((keepIds: ReadonlySet<string>) => Effect.Effect<ReadonlyArray<string>, RuntimeError>) | undefined
  /**
   * Removes leftovers that are no jail any more (never a jail with a usable state): cgroups without a jail
   * directory, jail directories of crashed creates (after a grace period) or of earlier versions, uid leases
   * whose jail is gone, loop devices of this DATA_DIR left attached. What it removed, for the log.
   */
  readonly sweep?:
    | Effect.Effect<{ readonly jails: ReadonlyArray<string>; readonly leases: ReadonlyArray<number>; readonly loops: ReadonlyArray<string> }, RuntimeError>
    | undefined
  /** See `defaultInternetOf` (absent: true). Optional so that test doubles need not say. */
  readonly defaultInternet?: boolean | undefined
  /**
   * What this host can give one sandbox now (its cores, its memory, the free space of DATA_DIR's file system): a
   * create asking for more is refused. Optional so that test doubles need not implement it.
   */
  readonly limits?: (() => RuntimeLimits) | undefined
  /**
   * Stops the runtime without touching sandboxes (they outlive the gateway): no more warm jails (the idle ones
   * are destroyed), pending agent calls end. Idempotent. The Layer runs it as its finalizer.
   */
  readonly shutdown?: Effect.Effect<void> | undefined
}

/**
 * Whether a sandbox reaches the internet when its creator leaves it unsaid: the operator's choice
 * (`RUNTIME_DEFAULT_INTERNET`, on unless set to false). The emulators give it where their provider's API leaves the
 * network at the provider's default.
 */
export const defaultInternetOf = (runtime: Pick<LocalRuntimeShape, "defaultInternet">): boolean => runtime.defaultInternet ?? true

export class LocalRuntime extends Context.Tag("app/LocalRuntime")<LocalRuntime, LocalRuntimeShape>() {}
