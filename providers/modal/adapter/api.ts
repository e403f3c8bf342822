/**
 * The part of Modal's JavaScript SDK (`modal`, pinned at 0.11.1) the adapter uses, as a small interface of plain
 * types: the adapter depends on this and nothing of the SDK's own types. `sdk.ts` implements it with the real
 * `ModalClient` (gRPC to api.modal.com); the emulator (`../emulator/`) implements it in-process over the local
 * runtime. Every method mirrors one SDK call (named next to it), so the adapter's code path is the same on both.
 *
 * Failures are `ModalApiError`s whose `code` says what the SDK said: its error classes (NotFoundError,
 * AlreadyExistsError, InvalidError, ResourceExhaustedError, the SandboxFilesystem*Error family) and, for what
 * reaches the caller as a raw gRPC status, that status.
 */

export type ModalApiErrorCode =
  /** NotFoundError, gRPC NOT_FOUND, SandboxFilesystemNotFoundError. */
  | "not_found"
  /** AlreadyExistsError, gRPC ALREADY_EXISTS. */
  | "already_exists"
  /** gRPC UNAUTHENTICATED / PERMISSION_DENIED, or no credentials. */
  | "auth"
  /** InvalidError, gRPC INVALID_ARGUMENT. */
  | "invalid"
  /** ResourceExhaustedError, gRPC RESOURCE_EXHAUSTED. */
  | "resource_exhausted"
  /** gRPC UNAVAILABLE, DEADLINE_EXCEEDED, a transport failure. */
  | "unavailable"
  /** ConflictError, gRPC FAILED_PRECONDITION: the sandbox is over. */
  | "conflict"
  /** SandboxFilesystemIsADirectoryError. */
  | "is_directory"
  /** SandboxFilesystemNotADirectoryError. */
  | "not_a_directory"
  /** SandboxFilesystemDirectoryNotEmptyError. */
  | "directory_not_empty"
  /** SandboxFilesystemFileTooLargeError. */
  | "file_too_large"
  /** SandboxFilesystemPermissionError. */
  | "permission_denied"
  /** Anything else. */
  | "internal"

export class ModalApiError extends Error {
  readonly code: ModalApiErrorCode
  constructor(code: ModalApiErrorCode, message: string) {
    super(message)
    this.name = "ModalApiError"
    this.code = code
  }
}

/** `client.sandboxes.create(app, image, params)` as the adapter calls it. */
export interface ModalSandboxSpec {
  /** Unique per app among running sandboxes: `metal-<sandbox id>`. */
  readonly name: string
  /** Physical cores (a Modal core is two vCPUs). */
  readonly cpu: number
  readonly memoryMiB: number
  readonly timeoutMs: number
  readonly env: Readonly<Record<string, string>>
  readonly tags: Readonly<Record<string, string>>
  /** Absent: Modal's default (the network on). */
  readonly blockNetwork?: boolean | undefined
  /** The image's command (an `oci_image` source's `command`); none: Modal keeps the sandbox up on its own. */
  readonly command?: ReadonlyArray<string> | undefined
}

/** `sandbox.exec(command, {mode: "binary", workdir, env, timeoutMs})`. */
export interface ModalExecSpec {
  readonly workdir?: string | undefined
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly timeoutMs?: number | undefined
}

/** A `ContainerProcess` in binary mode. */
export interface ModalProcess {
  /** `process.stdout` / `process.stderr`: the bytes as they come. */
  readonly stdout: AsyncIterable<Uint8Array>
  readonly stderr: AsyncIterable<Uint8Array>
  /** `process.stdin.writeBytes(data)`. */
  readonly writeStdin: (data: Uint8Array) => Promise<void>
  /** `process.stdin.close()` (the command reads end-of-file). */
  readonly closeStdin: () => Promise<void>
  /** `process.wait()`: the exit code. */
  readonly wait: () => Promise<number>
}

/** The SDK's `FileInfo`, the fields used. */
export interface ModalFileInfo {
  readonly path: string
  readonly type: "file" | "directory" | "symlink"
  readonly size: number
  /** Unix epoch seconds. */
  readonly modifiedTime: number
}

/** `SandboxGetResourceUsageResponse`: what Modal meters for a sandbox. */
export interface ModalResourceUsage {
  readonly cpuCoreNanosecs: number
  readonly memGibNanosecs: number
  readonly gpuNanosecs: number
  readonly gpuType: string | null
}

export interface ModalApi {
  /**
   * `client.apps.fromName(appName, {environment, createIfMissing: true})`, `client.images.fromRegistry(image)`,
   * then `client.sandboxes.create(app, image, spec)` → the sandbox id (already_exists for a name in use).
   */
  readonly createSandbox: (appName: string, image: string, spec: ModalSandboxSpec) => Promise<string>
  /** `client.sandboxes.fromName(appName, name)` → the running sandbox's id (not_found when there is none). */
  readonly sandboxFromName: (appName: string, name: string) => Promise<string>
  /** `sandbox.getTags()`. */
  readonly getTags: (sandboxId: string) => Promise<Readonly<Record<string, string>>>
  /** `sandbox.poll()`: null while it runs, else its exit code. */
  readonly poll: (sandboxId: string) => Promise<number | null>
  /** `sandbox.terminate()`. */
  readonly terminate: (sandboxId: string) => Promise<void>
  /** `client.cpClient.sandboxGetResourceUsage({sandboxId})`. */
  readonly resourceUsage: (sandboxId: string) => Promise<ModalResourceUsage>
  /** `sandbox.exec(command, {mode: "binary", …})`. */
  readonly exec: (sandboxId: string, command: ReadonlyArray<string>, spec: ModalExecSpec) => Promise<ModalProcess>
  /** `sandbox.filesystem.readBytes(path)` (whole files). */
  readonly readBytes: (sandboxId: string, path: string) => Promise<Uint8Array>
  /** `sandbox.filesystem.writeBytes(data, path)` (parents made, an existing file replaced). */
  readonly writeBytes: (sandboxId: string, path: string, data: Uint8Array) => Promise<void>
  /** `sandbox.filesystem.stat(path)` (a symlink itself, not its target). */
  readonly stat: (sandboxId: string, path: string) => Promise<ModalFileInfo>
  /** `sandbox.filesystem.listFiles(path)`: one directory's entries. */
  readonly listFiles: (sandboxId: string, path: string) => Promise<ReadonlyArray<ModalFileInfo>>
  /** `sandbox.filesystem.remove(path, {recursive})`. */
  readonly remove: (sandboxId: string, path: string, recursive: boolean) => Promise<void>
}
