/**
 * How HTTP adapters turn what went wrong into `ProviderError` kinds (reference/providers.md §2.5, §3.2):
 *
 * - statuses: 401/403 auth, 402 quota, 429 capacity, 404 not_found, 409 customer (a conflict with the
 *   resource's state), 400/413/422 and other 4xx invalid_request, 408 and 5xx unavailable. A create (or any
 *   call that changes state) answered 500/502/504 may still have taken effect: `ambiguous` callers get
 *   `unknown_outcome` there, so the walk reconciles instead of creating twice.
 * - transport failures: nothing was sent when the connection was refused, the name did not resolve or TLS
 *   failed → unavailable. A reset, a closed socket or a timeout after the request went out → the outcome is
 *   unknown for a mutating call (unknown_outcome), and merely unavailable for a read.
 */
import { Effect } from "effect"
import { type ProviderCapabilities, ProviderError, type ProviderErrorKind, type ProviderName, unsupported } from "./Provider.ts"

export const kindOfStatus = (status: number, options: { readonly ambiguous?: boolean } = {}): ProviderErrorKind => {
  if (status === 401 || status === 403) return "auth"
  if (status === 402) return "quota"
  if (status === 429) return "capacity"
  if (status === 404) return "not_found"
  if (status === 409) return "customer"
  if (status === 408) return "unavailable"
  if (status >= 500) return options.ambiguous === true && (status === 500 || status === 502 || status === 504) ? "unknown_outcome" : "unavailable"
  return "invalid_request"
}

/** A ProviderError factory for one provider; capacity, unavailability and unknown outcomes are worth retrying. */
export const providerFailure = (provider: ProviderName) => (kind: ProviderErrorKind, message: string, status?: number) =>
  new ProviderError({
    provider,
    kind,
    message,
    retryable: kind === "unavailable" || kind === "capacity" || kind === "timeout_absent" || kind === "unknown_outcome",
    status
  })

/** Error codes of a transport failure that happened before any byte of the request left (Bun and Node names). */
const NOT_SENT = new Set([
  "ECONNREFUSED",
  "ConnectionRefused",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_NONAME",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "FailedToOpenSocket",
  "ERR_INVALID_URL",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "CERT_HAS_EXPIRED",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY"
])

const codeOf = (error: unknown): string | undefined => {
  for (let e: unknown = error, depth = 0; e !== null && typeof e === "object" && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code
    if (typeof code === "string") return code
    e = (e as { cause?: unknown }).cause
  }
  return undefined
}

/** True when the failure certainly happened before the request was sent. */
export const failedBeforeSending = (error: unknown): boolean => {
  const reason = (error as { reason?: unknown } | null)?.reason
  // @effect/platform RequestError: Encode / InvalidUrl fail while building the request.
  if (reason === "Encode" || reason === "InvalidUrl") return true
  const code = codeOf(error)
  return code !== undefined && NOT_SENT.has(code)
}

/**
 * The kind for a request that failed without a response (`error` is the transport error, or "timeout" when our
 * own deadline expired). `mutating`: the request changes state at the provider.
 */
export const kindOfTransportFailure = (error: unknown, options: { readonly mutating: boolean }): ProviderErrorKind =>
  error !== "timeout" && failedBeforeSending(error) ? "unavailable" : options.mutating ? "unknown_outcome" : "unavailable"

/**
 * How an emulator says that the sandbox's image could not be pulled (the local runtime's `image_pull_failed`):
 * its error (or the sandbox's failure reason) reads `image pull failed: <which image and why>`, and the gateway
 * reports `image_pull_failed` with that reason (imagePullReason).
 */
const IMAGE_PULL_MARKER = "image pull failed: "
export const imagePullMessage = (reason: string) => `${IMAGE_PULL_MARKER}${reason}`
/** The reason of an image pull failure in a provider's error, or undefined when it is not one. */
export const imagePullReason = (e: Pick<ProviderError, "message">): string | undefined => {
  const at = e.message.indexOf(IMAGE_PULL_MARKER)
  return at < 0 ? undefined : e.message.slice(at + IMAGE_PULL_MARKER.length).slice(0, 500)
}

/** The `code` recorded on a provisioning attempt for a failure of this kind (reference: the worker's classes). */
export const attemptCode = (kind: ProviderErrorKind, error?: ProviderError): string => {
  if (error !== undefined && imagePullReason(error) !== undefined) return "image_pull_failed"
  switch (kind) {
    case "auth":
      return "provider_auth_error"
    case "capacity":
    case "quota":
      return "provider_capacity_unavailable"
    case "unavailable":
    case "timeout_absent":
      return "provider_unavailable"
    case "unknown_outcome":
      return "provider_unknown_outcome"
    case "unsupported":
      return "capability_unsupported"
    case "invalid_request":
    case "customer":
    case "not_found":
      return "provider_error"
  }
}

/**
 * An endpoint request the provider cannot take, checked before any call: no endpoints at all (`unsupported`), a
 * port outside 1–65535 or a lease outside 1 s to the provider's longest (`invalid_request`). Undefined: fine.
 */
export const endpointRequestProblem = (
  provider: ProviderName,
  endpoints: ProviderCapabilities["httpEndpoints"],
  input: { readonly port: number; readonly leaseSeconds: number }
): ProviderError | undefined => {
  if (endpoints === null || !endpoints.expose) return unsupported(provider, "HTTP endpoints")
  const fail = providerFailure(provider)
  if (!Number.isInteger(input.port) || input.port < 1 || input.port > 65_535) return fail("invalid_request", `port ${input.port} is out of range`)
  if (!Number.isInteger(input.leaseSeconds) || input.leaseSeconds < 1 || input.leaseSeconds > endpoints.maxLeaseSeconds) {
    return fail("invalid_request", `leases last 1 to ${endpoints.maxLeaseSeconds} seconds`)
  }
  return undefined
}

/**
 * A file write the provider's declared capabilities take, checked before any call: fails `unsupported` when it
 * writes no files, or not in the mode asked, or cannot make parents that are asked for, and `invalid_request` past
 * the bytes one write takes (a streamed write, without `data`, states no size here). Its file capabilities, when fine.
 */
export const checkWrite = (
  provider: ProviderName,
  files: ProviderCapabilities["files"],
  input: { readonly mode: "create" | "overwrite" | "append"; readonly createParents: boolean; readonly data?: Uint8Array | undefined }
): Effect.Effect<NonNullable<ProviderCapabilities["files"]>, ProviderError> => {
  if (files === null || !files.write) return Effect.fail(unsupported(provider, "writing files"))
  if (!files.writeModes.includes(input.mode)) return Effect.fail(unsupported(provider, `the ${input.mode} write mode`))
  if (input.createParents && !files.createParents) return Effect.fail(unsupported(provider, "creating parent directories"))
  if (input.data !== undefined && input.data.length > files.maxWriteBytes) {
    return Effect.fail(providerFailure(provider)("invalid_request", `${provider} takes at most ${files.maxWriteBytes} bytes per write`))
  }
  return Effect.succeed(files)
}

/**
 * Why a file operation failed, read from the failure's kind and the errno wording providers use (`ENOENT` / "no
 * such file or directory", …): the same words come from a real provider's daemon and from the local runtime's
 * agent, so the same situation has the same reason on every provider (the conformance suite checks it).
 */
export type FileReason =
  | "not_found"
  | "name_too_long"
  | "permission_denied"
  | "is_a_directory"
  | "not_a_directory"
  | "already_exists"
  | "not_empty"
  | "too_many_links"
  | "no_space"
  | "file_too_large"
  | "io_error"
  | "invalid_path"

/** Errno wording, most specific first (a "not a directory" message may also say "not found"). */
const FILE_REASONS: ReadonlyArray<readonly [FileReason, RegExp]> = [
  ["name_too_long", /ENAMETOOLONG|name too long/i],
  ["too_many_links", /ELOOP|too many (levels of )?symbolic links/i],
  ["not_a_directory", /ENOTDIR|not a directory/i],
  ["is_a_directory", /EISDIR|is a directory/i],
  ["not_empty", /ENOTEMPTY|directory not empty|is not empty/i],
  ["already_exists", /EEXIST|already exists/i],
  ["no_space", /ENOSPC|EDQUOT|no space left|quota exceeded/i],
  ["file_too_large", /EFBIG|file too large/i],
  ["permission_denied", /EACCES|EPERM|EROFS|permission denied|operation not permitted|read-only file system/i],
  ["not_found", /ENOENT|no such file|does not exist|not found/i],
  ["io_error", /\bEIO\b|i\/o error/i],
  ["invalid_path", /cannot be deleted|escapes|outside the sandbox|invalid path|must be absolute/i]
]

const SERVER_SIDE: ReadonlySet<FileReason> = new Set(["no_space", "io_error", "file_too_large"])

/** The reason a file operation failed, or undefined when the failure is not about the file. */
export const fileReasonOf = (e: ProviderError): FileReason | undefined => {
  // A provider that failed (5xx) may still say why, when the file system itself refused: a full disk, an I/O error.
  if (e.kind === "unavailable") return FILE_REASONS.find(([reason, pattern]) => SERVER_SIDE.has(reason) && pattern.test(e.message))?.[0]
  if (e.kind !== "not_found" && e.kind !== "invalid_request" && e.kind !== "customer") return undefined
  for (const [reason, pattern] of FILE_REASONS) if (pattern.test(e.message)) return reason
  return e.kind === "not_found" ? "not_found" : "invalid_path"
}
