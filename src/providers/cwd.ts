/**
 * A missing working directory, said the same way on every provider: the exec fails with kind `invalid_request`
 * and a message naming the working directory as not found, which the gateway reports as `cwd_not_found`
 * (src/services/sandboxes/ProviderErrors.ts). Providers whose API takes a cwd refuse it themselves (E2B's envd,
 * Vercel, Blaxel, Modal, Cloudflare's bridge); adapters that run one shell line `cd` first, and a failed `cd`
 * would otherwise look like the command's own failure: where output is buffered until the end (Runloop,
 * Freestyle) the line marks it (`cdOrMark`) and the adapter recognises the mark (`endedAtCd`); Daytona, whose output
 * streams, asks its file API first.
 */
import { fileReasonOf } from "./errors.ts"
import { ProviderError, type ProviderName } from "./Provider.ts"

/** The status and stderr line of a shell line that stopped at its `cd` (nothing of the command ran). */
export const CWD_MISSING_EXIT = 97
export const CWD_MISSING_MARK = "sandbox-gateway: the working directory does not exist"

/** `cd` into a (shell-quoted) directory, or the mark on stderr and `CWD_MISSING_EXIT`. */
export const cdOrMark = (quotedDir: string) => `{ cd -- ${quotedDir} 2>/dev/null || { echo '${CWD_MISSING_MARK}' >&2; exit ${CWD_MISSING_EXIT}; }; }`

/** A buffered execution whose whole output is the mark and whose status is its exit: it stopped at the `cd`. */
export const endedAtCd = (output: { readonly stdout: string; readonly stderr: string }, exitCode: number | null | undefined) =>
  exitCode === CWD_MISSING_EXIT && output.stdout === "" && output.stderr === `${CWD_MISSING_MARK}\n`

export const cwdMissing = (provider: ProviderName, cwd?: string) =>
  new ProviderError({ provider, kind: "invalid_request", message: `cwd${cwd === undefined ? "" : ` ${cwd}`}: the working directory was not found`, retryable: false })

/** Whether a failed start (or a followed execution) says its working directory is not there, however the provider said so. */
export const isCwdMissing = (e: ProviderError) =>
  (e.kind === "invalid_request" || e.kind === "customer" || e.kind === "not_found") && /\bcwd\b|working dir/i.test(e.message) && fileReasonOf(e) === "not_found"
