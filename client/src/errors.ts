import type { ErrorCode } from "../../src/domain/ErrorCodes.ts"

/**
 * A GatewayError's `code`: one of the API's closed set (`ErrorCode`, docs/guide/errors.md) for an answer of the
 * gateway; the failed resource's own `error.code` for an operation, process, endpoint or recording that failed
 * (`process_exit_nonzero`, `no_eligible_provider`, …); or the client's own (`network_error`, `client_error`,
 * `http_<status>` for a body that was not the envelope, `attach_*` for a terminal).
 */
export type GatewayErrorCode = ErrorCode | (string & {})

/** What a failed call to the gateway throws: the error envelope's fields, typed. */
export class GatewayError extends Error {
  override readonly name = "GatewayError"
  constructor(
    /** The envelope's `code` (`not_found`, `validation_error`, `invalid_sandbox_state`, …), or `network_error`. */
    readonly code: GatewayErrorCode,
    message: string,
    /** The HTTP status (0 for a request that got no answer). */
    readonly status: number,
    /** Safe to send again unchanged (with the same Idempotency-Key): the client already did, up to its retries. */
    readonly retryable: boolean,
    readonly details?: unknown,
    readonly requestId?: string
  ) {
    super(message)
  }
}

/** The gateway's envelope as it arrives in a response body (anything else is reported by its status). */
export const fromEnvelope = (status: number, body: unknown, requestId?: string): GatewayError => {
  const b = typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {}
  return new GatewayError(
    typeof b["code"] === "string" ? b["code"] : `http_${status}`,
    typeof b["message"] === "string" ? b["message"] : `The gateway answered ${status}`,
    status,
    typeof b["retryable"] === "boolean" ? b["retryable"] : status >= 500 || status === 429,
    b["details"],
    typeof b["request_id"] === "string" ? b["request_id"] : requestId
  )
}

/** A failed answer to a plain `fetch` (the raw file route, an event stream, …), read as the gateway's envelope. */
export const fromResponse = async (response: Response): Promise<GatewayError> =>
  fromEnvelope(response.status, await response.json().catch(() => undefined), response.headers.get("x-request-id") ?? undefined)
