/**
 * What a provider failure becomes in the API: a message in the user's terms, built from what the user asked (a
 * path, a command, a port) and a stable reason, never the provider's own text. That text carries the provider's
 * (or its emulator's) internals — route names, status lines, errno names, host paths, JavaScript fragments — and
 * is only logged, for the operator.
 *
 * The reason is read from the failure's kind and, for file system errors, from the errno wording providers use
 * (`ENOENT` / "no such file or directory", …): the same words come from a real provider's daemon and from the
 * local runtime's agent. `details.reason` carries it: a client may rely on it; the message may change.
 */
import { Effect } from "effect"
import type { ErrorObject } from "../../domain/Errors.ts"
import { type FileReason, fileReasonOf, imagePullReason } from "../../providers/errors.ts"
import { isCwdMissing } from "../../providers/cwd.ts"

export { type FileReason, fileReasonOf } from "../../providers/errors.ts"
import type { ProviderError, ProviderErrorKind } from "../../providers/Provider.ts"
import type { Attempt } from "../../providers/routing.ts"

/** A path as quoted back: bounded, so a 4,000-character path does not fill the message. */
const quoted = (text: string, max = 200) => (text.length <= max ? text : `${text.slice(0, max)}…`)

const fileMessage = (reason: FileReason, path: string): string => {
  const p = quoted(path)
  switch (reason) {
    case "not_found":
      return `No such file or directory: ${p}`
    case "name_too_long":
      return `The file name is too long: ${p}`
    case "permission_denied":
      return `Permission denied: ${p}`
    case "is_a_directory":
      return `${p} is a directory`
    case "not_a_directory":
      return `A part of the path is not a directory: ${p}`
    case "already_exists":
      return `${p} already exists`
    case "not_empty":
      return `The directory is not empty: ${p}`
    case "too_many_links":
      return `Too many symbolic links in the path: ${p}`
    case "no_space":
      return "The sandbox's disk is full"
    case "file_too_large":
      return `The file is too large: ${p}`
    case "io_error":
      return `The sandbox could not read or write ${p}`
    case "invalid_path":
      return `The path cannot be used for this operation: ${p}`
  }
}

/** An `auth` failure on an organization's own provider account (BYOK): its stored credentials are the problem. */
const ownCredentialsRejected = (e: ProviderError) => e.kind === "auth" && e.account === "organization"

/** The error code of a provider's failure: `provider_<kind>`, or `provider_credentials_rejected` (BYOK). */
export const providerCode = (e: ProviderError): ProviderCode => (ownCredentialsRejected(e) ? "provider_credentials_rejected" : `provider_${e.kind}`)

/** A provider failure's code (domain/ErrorCodes.ts lists them). */
export type ProviderCode = "provider_credentials_rejected" | `provider_${ProviderErrorKind}`

/** An error object whose code is known to be one of `C`. */
export type CodedErrorObject<C extends string> = ErrorObject & { readonly code: C }

/** Failures that are not about what was asked but about reaching the provider (or the sandbox) at all. */
const providerMessage = (e: ProviderError, what: string): string => {
  switch (e.kind) {
    case "auth":
      return ownCredentialsRejected(e)
        ? `${e.provider} refused the organization's stored credentials (or they were removed) while trying to ${what}; store valid ones under the organization's provider-credentials/${e.provider}`
        : `The provider refused our credentials while trying to ${what}`
    case "quota":
    case "capacity":
      return `The provider has no capacity to ${what} now; try again later`
    case "unavailable":
    case "timeout_absent":
      return `The sandbox or its provider did not answer while trying to ${what}; try again`
    case "unknown_outcome":
      return `The provider's answer was lost while trying to ${what}; it may or may not have happened`
    case "unsupported":
      return `The provider does not support this: could not ${what}`
    case "not_found":
      return `The sandbox is gone at its provider: could not ${what}`
    case "invalid_request":
    case "customer":
      return `The provider refused to ${what}`
  }
}

const withReason = <C extends string>(error: Omit<CodedErrorObject<C>, "details">, reason: string, provider: string): CodedErrorObject<C> => ({ ...error, details: { reason, provider } })

/** The provider's own words, for the operator's log only. */
export const logProviderFailure = (what: string, e: ProviderError) =>
  Effect.logWarning(`provider failure: ${what}`, { provider: e.provider, kind: e.kind, status: e.status, message: e.message })

export type FileOperation = "read" | "write" | "list" | "delete"

/**
 * A file operation's failure: `customer` when the request itself cannot succeed (the file is missing, the name
 * too long …: final, not retried), otherwise a failure of the provider, with whether retrying may help.
 */
export const fileFailure = (
  operation: FileOperation,
  path: string,
  e: ProviderError
): { readonly customer: boolean; readonly error: CodedErrorObject<"capability_unsupported" | "file_not_found" | "runtime_operation_failed" | "invalid_path"> } => {
  if (e.kind === "unsupported") {
    return { customer: true, error: withReason({ code: "capability_unsupported", message: `${e.provider} sandboxes cannot ${operation} files this way`, retryable: false }, "unsupported", e.provider) }
  }
  const reason = fileReasonOf(e)
  if (reason !== undefined) {
    const code = reason === "not_found" ? "file_not_found" as const : reason === "no_space" || reason === "io_error" ? "runtime_operation_failed" as const : "invalid_path" as const
    return { customer: true, error: withReason({ code, message: fileMessage(reason, path), retryable: false }, reason, e.provider) }
  }
  const verb = operation === "list" ? `list ${quoted(path)}` : `${operation} ${quoted(path)}`
  return { customer: false, error: withReason({ code: "runtime_operation_failed", message: providerMessage(e, verb), retryable: e.retryable }, providerCode(e), e.provider) }
}

/** How the terminal adapters (providers/daytona/adapter/terminals.ts) begin the reasons they give the user. */
const TERMINAL_NOT_STARTED = /^(a terminal's |the sandbox's shell )/

/** A process that could not be started or followed at the provider. */
export const processFailure = (e: ProviderError, request: { readonly command: ReadonlyArray<string>; readonly cwd: string | null }): ErrorObject => {
  const code = providerCode(e)
  if (e.kind === "invalid_request" || e.kind === "customer" || e.kind === "not_found") {
    const reason = fileReasonOf(e)
    if (request.cwd !== null && isCwdMissing(e)) {
      // The same code on every provider, however it said so (src/providers/cwd.ts).
      return withReason({ code: "cwd_not_found", message: `The working directory does not exist: ${quoted(request.cwd)}`, retryable: false }, "cwd_not_found", e.provider)
    }
    const program = quoted(request.command[0] ?? "")
    if (reason === "not_found" && e.kind !== "not_found") return withReason({ code, message: `The command was not found: ${program}`, retryable: false }, "command_not_found", e.provider)
    if (reason === "permission_denied") return withReason({ code, message: `The command may not be run: ${program}`, retryable: false }, "permission_denied", e.provider)
    // A terminal adapter's own words (never the provider's) on why it did not start the command: what the
    // request may not hold where the command is typed into a shell, or what the sandbox's shell did instead.
    if (TERMINAL_NOT_STARTED.test(e.message)) {
      return withReason({ code, message: `The terminal did not start the command: ${e.message.slice(0, 300)}`, retryable: false }, "terminal_not_started", e.provider)
    }
  }
  return withReason({ code, message: providerMessage(e, "run the command"), retryable: e.retryable }, providerCode(e), e.provider)
}

/** A lifecycle action (create, pause, resume, destroy) or endpoint action that failed at the provider. */
export const actionFailure = <const C extends string>(code: C, what: string, e: ProviderError): CodedErrorObject<C> =>
  withReason({ code, message: providerMessage(e, what), retryable: e.retryable }, providerCode(e), e.provider)

/**
 * An attempt as clients see it: a failed one says what failed in our words (its `code` already names the class);
 * ineligible attempts keep their message, which is ours (the unmet requirements).
 */
export const publicAttempt = (attempt: Attempt): Attempt => {
  if (attempt.outcome !== "failed" || attempt.message === null || attempt.message === `${attempt.provider} is not configured`) return attempt
  // An image pull failure says which image and why (the emulators' words are ours: the local runtime's).
  const pull = attempt.code === "image_pull_failed" ? imagePullReason({ message: attempt.message }) : undefined
  return { ...attempt, message: pull !== undefined ? `The image could not be pulled: ${pull}` : ATTEMPT_MESSAGES[attempt.code ?? ""] ?? "The provider could not create the sandbox" }
}

const ATTEMPT_MESSAGES: Record<string, string> = {
  provider_auth_error: "The provider refused our credentials",
  provider_credentials_rejected: "The provider refused the organization's stored credentials (or they were removed)",
  provider_capacity_unavailable: "The provider has no capacity for this sandbox now",
  provider_unavailable: "The provider did not answer",
  provider_unknown_outcome: "The provider's answer was lost; the sandbox is looked for again",
  capability_unsupported: "The provider does not support this request",
  image_pull_failed: "The provider could not pull the image",
  provider_error: "The provider refused the request"
}
