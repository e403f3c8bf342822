/**
 * `ModalApi` on Modal's real SDK (`modal` 0.11.1, gRPC to api.modal.com). The SDK is loaded on first use (it is
 * large, and an emulated gateway never needs it). It is reached through `SdkClient`, the structural subset of
 * `ModalClient` used here, so that tests can hand in a recording double (modal-remote.test.ts) and the rest of
 * the adapter never sees an SDK type.
 *
 * The SDK takes its server from MODAL_SERVER_URL (or ~/.modal.toml), not from a constructor option: its
 * `endpoint` parameter is declared but unused in 0.11.1. Credentials are passed to the constructor (token id and
 * secret, and the environment), so BYOK instances never touch the process environment.
 */
import type { ModalClientParams } from "modal"
import { type ModalApi, ModalApiError, type ModalApiErrorCode, type ModalFileInfo, type ModalProcess } from "./api.ts"

/** `FileInfo` as the SDK returns it (fields used). */
interface SdkFileInfo {
  readonly path: string
  readonly type: string
  readonly size: number
  readonly modifiedTime: number
}

/** A `ContainerProcess` in binary mode (fields used). */
export interface SdkProcess {
  readonly stdin: { writeBytes(bytes: Uint8Array): Promise<void> }
  readonly stdout: ReadableStream<Uint8Array>
  readonly stderr: ReadableStream<Uint8Array>
  closeStdin(): Promise<void>
  wait(): Promise<number>
}

/** A `Sandbox` (fields used). */
export interface SdkSandbox {
  readonly sandboxId: string
  exec(command: Array<string>, params: { mode: "binary"; workdir?: string; env?: Record<string, string>; timeoutMs?: number }): Promise<SdkProcess>
  poll(): Promise<number | null>
  terminate(): Promise<unknown>
  getTags(): Promise<Record<string, string>>
  readonly filesystem: {
    readBytes(path: string): Promise<Uint8Array>
    writeBytes(data: Uint8Array, path: string): Promise<void>
    stat(path: string): Promise<SdkFileInfo>
    listFiles(path: string): Promise<Array<SdkFileInfo>>
    remove(path: string, options: { recursive: boolean }): Promise<void>
  }
}

/** The part of `ModalClient` the adapter calls. App and image are the SDK's own objects, passed through. */
export interface SdkClient {
  readonly apps: { fromName(name: string, params: { environment?: string; createIfMissing?: boolean }): Promise<{ readonly appId: string }> }
  readonly images: { fromRegistry(tag: string): object }
  readonly sandboxes: {
    create(app: object, image: object, params: {
      name: string
      cpu: number
      memoryMiB: number
      timeoutMs: number
      env: Record<string, string>
      tags: Record<string, string>
      blockNetwork?: boolean
      command?: Array<string>
    }): Promise<SdkSandbox>
    fromName(appName: string, name: string, params?: { environment?: string }): Promise<SdkSandbox>
    fromId(sandboxId: string): Promise<SdkSandbox>
  }
  readonly cpClient: {
    sandboxGetResourceUsage(request: { sandboxId: string }): Promise<{ cpuCoreNanosecs: number; memGibNanosecs: number; gpuNanosecs: number; gpuType?: string | undefined }>
  }
}

export interface ModalSdkOptions {
  readonly tokenId: string
  readonly tokenSecret: string
  readonly environment?: string | undefined
}

/** gRPC status codes (the SDK lets some reach the caller as nice-grpc `ClientError`s with `code` and `details`). */
const GRPC_CODES: Readonly<Record<number, ModalApiErrorCode>> = {
  3: "invalid",
  4: "unavailable",
  5: "not_found",
  6: "already_exists",
  7: "auth",
  8: "resource_exhausted",
  9: "conflict",
  14: "unavailable",
  16: "auth"
}

/** The SDK's error classes by name (`Error.name` is not set by them, so the constructor's name is used). */
const CLASS_CODES: Readonly<Record<string, ModalApiErrorCode>> = {
  NotFoundError: "not_found",
  AlreadyExistsError: "already_exists",
  InvalidError: "invalid",
  ResourceExhaustedError: "resource_exhausted",
  ConflictError: "conflict",
  SandboxTimeoutError: "conflict",
  ClientClosedError: "unavailable",
  SandboxFilesystemNotFoundError: "not_found",
  SandboxFilesystemIsADirectoryError: "is_directory",
  SandboxFilesystemNotADirectoryError: "not_a_directory",
  SandboxFilesystemDirectoryNotEmptyError: "directory_not_empty",
  SandboxFilesystemFileTooLargeError: "file_too_large",
  SandboxFilesystemPermissionError: "permission_denied",
  SandboxFilesystemPathAlreadyExistsError: "already_exists"
}

/** What an SDK failure means, as a `ModalApiError`. */
export const translateSdkError = (error: unknown): ModalApiError => {
  if (error instanceof ModalApiError) return error
  const message = error instanceof Error ? error.message : String(error)
  const className = error !== null && typeof error === "object" ? error.constructor.name : ""
  const byClass = CLASS_CODES[className]
  if (byClass !== undefined) return new ModalApiError(byClass, message)
  const code = error !== null && typeof error === "object" ? (error as { code?: unknown }).code : undefined
  if (typeof code === "number" && GRPC_CODES[code] !== undefined) return new ModalApiError(GRPC_CODES[code], message)
  if (/missing credentials|token/i.test(message) && /credential|auth/i.test(message)) return new ModalApiError("auth", message)
  if (typeof code === "string" && /^E[A-Z]+$/.test(code)) return new ModalApiError("unavailable", message)
  return new ModalApiError("internal", message)
}

const guard = async <A>(call: () => Promise<A>): Promise<A> => {
  try {
    return await call()
  } catch (e) {
    throw translateSdkError(e)
  }
}

const fileInfo = (info: SdkFileInfo): ModalFileInfo => ({
  path: info.path,
  type: info.type === "directory" ? "directory" : info.type === "symlink" ? "symlink" : "file",
  size: info.size,
  modifiedTime: info.modifiedTime
})

const iterate = async function*(stream: ReadableStream<Uint8Array>): AsyncIterable<Uint8Array> {
  const reader = stream.getReader()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      yield typeof value === "string" ? new TextEncoder().encode(value) : value
    }
  } catch (e) {
    throw translateSdkError(e)
  } finally {
    reader.releaseLock()
  }
}

/** `ModalApi` over an SDK client (the real `ModalClient`, or a double). */
export const sdkApi = (client: () => Promise<SdkClient>, environment: string | undefined): ModalApi => {
  const env = environment === undefined ? {} : { environment }
  /** Sandbox handles by id: `fromId` makes no call, but a handle keeps its command-router connection. */
  const handles = new Map<string, Promise<SdkSandbox>>()
  const sandbox = (sandboxId: string) => {
    let handle = handles.get(sandboxId)
    if (handle === undefined) {
      handle = client().then((c) => c.sandboxes.fromId(sandboxId))
      handle.catch(() => handles.delete(sandboxId))
      handles.set(sandboxId, handle)
    }
    return handle
  }

  return {
    createSandbox: (appName, image, spec) =>
      guard(async () => {
        const c = await client()
        const app = await c.apps.fromName(appName, { ...env, createIfMissing: true })
        const created = await c.sandboxes.create(app, c.images.fromRegistry(image), {
          name: spec.name,
          cpu: spec.cpu,
          memoryMiB: spec.memoryMiB,
          timeoutMs: spec.timeoutMs,
          env: { ...spec.env },
          tags: { ...spec.tags },
          ...(spec.blockNetwork === undefined ? {} : { blockNetwork: spec.blockNetwork }),
          ...(spec.command === undefined ? {} : { command: [...spec.command] })
        })
        handles.set(created.sandboxId, Promise.resolve(created))
        return created.sandboxId
      }),
    sandboxFromName: (appName, name) =>
      guard(async () => {
        const found = await (await client()).sandboxes.fromName(appName, name, env)
        handles.set(found.sandboxId, Promise.resolve(found))
        return found.sandboxId
      }),
    getTags: (id) => guard(async () => (await sandbox(id)).getTags()),
    poll: (id) => guard(async () => (await sandbox(id)).poll()),
    terminate: (id) => guard(async () => void (await (await sandbox(id)).terminate())),
    resourceUsage: (id) =>
      guard(async () => {
        const r = await (await client()).cpClient.sandboxGetResourceUsage({ sandboxId: id })
        return { cpuCoreNanosecs: Number(r.cpuCoreNanosecs), memGibNanosecs: Number(r.memGibNanosecs), gpuNanosecs: Number(r.gpuNanosecs), gpuType: r.gpuType ?? null }
      }),
    exec: (id, command, spec) =>
      guard(async () => {
        const p = await (await sandbox(id)).exec([...command], {
          mode: "binary",
          ...(spec.workdir === undefined ? {} : { workdir: spec.workdir }),
          ...(spec.env === undefined ? {} : { env: { ...spec.env } }),
          ...(spec.timeoutMs === undefined ? {} : { timeoutMs: spec.timeoutMs })
        })
        const process: ModalProcess = {
          stdout: iterate(p.stdout),
          stderr: iterate(p.stderr),
          writeStdin: (data) => guard(() => p.stdin.writeBytes(data)),
          closeStdin: () => guard(() => p.closeStdin()),
          wait: () => guard(() => p.wait())
        }
        return process
      }),
    readBytes: (id, path) => guard(async () => (await sandbox(id)).filesystem.readBytes(path)),
    writeBytes: (id, path, data) => guard(async () => (await sandbox(id)).filesystem.writeBytes(data, path)),
    stat: (id, path) => guard(async () => fileInfo(await (await sandbox(id)).filesystem.stat(path))),
    listFiles: (id, path) => guard(async () => (await (await sandbox(id)).filesystem.listFiles(path)).map(fileInfo)),
    remove: (id, path, recursive) => guard(async () => (await sandbox(id)).filesystem.remove(path, { recursive }))
  }
}

/** `ModalApi` on a real `ModalClient` with these credentials, created on first use. */
export const modalSdkApi = (options: ModalSdkOptions): ModalApi => {
  let client: Promise<SdkClient> | undefined
  const make = async (): Promise<SdkClient> => {
    const { ModalClient } = await import("modal")
    const params: ModalClientParams = {
      tokenId: options.tokenId,
      tokenSecret: options.tokenSecret,
      ...(options.environment === undefined ? {} : { environment: options.environment })
    }
    return new ModalClient(params)
  }
  return sdkApi(() => (client ??= make()), options.environment)
}
