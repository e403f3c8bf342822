/**
 * An emulator's failures in its provider's terms. A handler throws `HttpFailure` (a status, a message, and the
 * provider's error code where its error body has one); the emulator's catch answers whatever was thrown with
 * `failureAnswer`, built once per error body shape:
 *
 *   export const vercelError = (status: number, code: string, message: string) => json({ error: { code, message } }, status)
 *   export const answerFailure = failureAnswer("vercel", (f) => vercelError(f.status, f.code ?? "error", f.message), {
 *     codeOf: (status) => ERROR_CODES[status]
 *   })
 *   ...
 *   return answering(answerFailure, () => found.handle({ request, url }))
 *
 * A runtime failure (the sandbox's own: not found, a conflict, an image that would not pull) gets its status from
 * its kind and says its own message; anything else thrown is a 500 "internal error", its text only logged.
 */
import { emulatorMessage, statusOfRuntimeError } from "./server.ts"

/** Thrown by an emulator's handler: answered with its status in the provider's error body. */
export class HttpFailure extends Error {
  constructor(readonly status: number, message: string, readonly code?: string) {
    super(message)
  }
}

export interface FailureOptions {
  /** The status of a runtime failure (default: `statusOfRuntimeError`, by its kind). */
  readonly statusOf?: (e: unknown) => number
  /** The provider's error code for a runtime failure of this status (default: none). */
  readonly codeOf?: (status: number) => string | undefined
}

/** What a handler threw, as an HttpFailure: itself, or a runtime failure (or crash) in the emulator's terms. */
export const asHttpFailure = (e: unknown, emulator: string, options: FailureOptions = {}): HttpFailure => {
  if (e instanceof HttpFailure) return e
  const status = (options.statusOf ?? statusOfRuntimeError)(e)
  return new HttpFailure(status, emulatorMessage(e, emulator), options.codeOf?.(status))
}

/** Answers anything a handler threw with `respond`, which writes the provider's error body. */
export const failureAnswer = (emulator: string, respond: (failure: HttpFailure) => Response, options: FailureOptions = {}) => (e: unknown): Response =>
  respond(asHttpFailure(e, emulator, options))

/** What the handler answers (undefined: a WebSocket upgrade it took), or what it throws answered by `answer`. */
export const answering = async <A extends Response | undefined>(answer: (e: unknown) => Response, handle: () => Promise<A> | A): Promise<A | Response> => {
  try {
    return await handle()
  } catch (e) {
    return answer(e)
  }
}
