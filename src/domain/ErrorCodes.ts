/**
 * The closed set of error codes the API answers with, by HTTP status, each with what it means. A code is a stable
 * name a client may switch on; the message may change. Errors.ts builds one error class per status whose `code`
 * is one of that status's codes, so a code outside this table does not compile; each route declares the codes it
 * can answer with (`failsWith` in Errors.ts), and HttpApi checks its handler against them.
 *
 * A code may appear under two statuses when the same meaning is the caller's fault in one place and the
 * provider's in another (`runtime_operation_failed`: a full disk is 409, an unreachable provider 503).
 */

/** The `provider_<kind>` codes: a provider's failure by kind (src/providers/Provider.ts `ProviderError`). */
const PROVIDER_FAILURES = {
  provider_auth: "The provider refused the gateway's credentials",
  provider_credentials_rejected: "The provider refused the organization's own stored credentials (bring-your-own-key)",
  provider_quota: "The provider's quota is used up; try again later",
  provider_capacity: "The provider has no capacity now; try again later",
  provider_unavailable: "The provider or the sandbox did not answer; try again",
  provider_timeout_absent: "The provider did not answer in time; try again",
  provider_unknown_outcome: "The provider's answer was lost: the action may or may not have happened",
  provider_unsupported: "The provider does not support this",
  provider_not_found: "The sandbox is gone at its provider",
  provider_invalid_request: "The provider refused the request",
  provider_customer: "The provider refused the request as the caller's fault"
} as const

export const ERROR_CODES = {
  400: {
    invalid_json: "The body is not valid JSON, or could not be read",
    invalid_host: "The request has no single Host header naming the server",
    bad_request: "The request cannot be understood (e.g. not a valid WebSocket upgrade)",
    project_header_required: "A project API key was sent without `X-Metal-Project-ID`",
    project_mismatch: "`X-Metal-Project-ID` names another project than the path",
    idempotency_key_required: "The route needs an `Idempotency-Key` header",
    unsupported_protocol_version: "The MCP protocol version is not supported"
  },
  401: {
    unauthenticated: "Missing, unknown, revoked or expired credential"
  },
  402: {
    insufficient_credits: "The organization has no credit left"
  },
  403: {
    forbidden: "The credential may not do this",
    csrf_failed: "A cookie-authenticated change without the session's CSRF token or from another origin"
  },
  404: {
    not_found: "No such resource visible to this credential, or no such route",
    file_not_found: "No such file or directory in the sandbox",
    metrics_unavailable: "The sandbox's provider does not report metrics"
  },
  405: {
    method_not_allowed: "The route exists but not with this method"
  },
  409: {
    conflict: "The request conflicts with the current state (a taken slug, the last owner, an existing member …)",
    invalid_sandbox_state: "The sandbox is not in a state that allows this (`details.state`)",
    invalid_process_state: "The process is not in a state that allows this",
    invalid_recording_state: "The recording is not in a state that allows this",
    process_terminal: "The process has already ended",
    recording_active: "A recording is running: stop it first",
    capability_unsupported: "The sandbox's provider cannot do this (`details.reason`)",
    unsupported_operation: "The sandbox's provider cannot do this action (pause on a provider without it)",
    resize_failed: "The provider refused to resize the terminal (`details.reason`)",
    capabilities_unavailable: "No capability snapshot for this sandbox yet",
    file_exists: "The file exists and overwrite was not asked",
    is_a_directory: "The path is a directory",
    endpoint_conflict: "An endpoint for this port exists with other settings",
    idempotency_mismatch: "The Idempotency-Key was used with another request",
    idempotency_in_progress: "A request with this Idempotency-Key is still running",
    api_key_must_be_revoked: "Only a revoked API key can be deleted",
    delivery_in_flight: "The webhook delivery is being sent now",
    organization_has_active_resources: "The organization still has sandboxes or other live resources",
    organization_has_credit_balance: "The organization still has credit",
    organization_has_pending_billing: "The organization has usage not yet billed",
    project_has_active_resources: "The project still has sandboxes or other live resources",
    runtime_operation_failed: "The sandbox could not do it (a full disk, an I/O error)",
    ...PROVIDER_FAILURES
  },
  410: {
    endpoint_inactive: "The endpoint was revoked or has expired"
  },
  413: {
    payload_too_large: "The request body is larger than the server or the provider accepts (`details.limit_bytes`)"
  },
  415: {
    unsupported_media_type: "The request body has the wrong content type"
  },
  416: {
    range_not_satisfiable: "The Range is malformed or outside the file (`Content-Range: bytes */<size>`)"
  },
  422: {
    validation_error: "The request failed validation (`details.issues`)",
    invalid_path: "The path cannot be used for this operation",
    confirmation_mismatch: "The confirmation does not match what is being deleted"
  },
  426: {
    upgrade_required: "The route is a WebSocket: connect with `Upgrade: websocket`"
  },
  429: {
    too_many_requests: "Too much is already waiting on this resource (`details.limit`); retry once some has finished"
  },
  500: {
    internal_error: "An unexpected server error"
  },
  502: {
    endpoint_unreachable: "The sandbox did not answer on the endpoint's port"
  },
  503: {
    service_unavailable: "A dependency is unavailable; try again",
    not_ready: "The database is not reachable",
    database_busy: "Another process held the database; nothing was written: send the request again",
    sandbox_unresponsive: "The sandbox did not answer in time; try again",
    sandbox_busy: "The sandbox's earlier work did not finish in time; try again",
    provider_timeout: "The provider did not answer in time; try again",
    stdin_write_failed: "The provider did not take the process's input (`details.reason`); try again",
    node_unreachable: "The node that serves the sandbox cannot be reached; try again",
    endpoint_provisioning: "The endpoint is still being provisioned",
    sandbox_unavailable: "The endpoint's sandbox is not running",
    runtime_operation_failed: "The sandbox or its provider failed to do it; `retryable` says whether to try again",
    ...PROVIDER_FAILURES
  }
} as const

export type ErrorStatus = keyof typeof ERROR_CODES
/** The codes of one status. */
export type CodeOf<S extends ErrorStatus> = keyof (typeof ERROR_CODES)[S] & string
/** Every code the API answers with. */
export type ErrorCode = { [S in ErrorStatus]: CodeOf<S> }[ErrorStatus]

/** The codes of one status, as a tuple for `Schema.Literal`. */
export const codesOf = <S extends ErrorStatus>(status: S) =>
  Object.keys(ERROR_CODES[status]) as unknown as readonly [CodeOf<S>, ...Array<CodeOf<S>>]

/** Codes as a route's documentation lists them (OpenAPI), each with what it means: "`code`: meaning; …". */
export const describeCodes = (status: ErrorStatus, codes: ReadonlyArray<string>): string =>
  codes.map((code) => `\`${code}\`: ${(ERROR_CODES[status] as Record<string, string>)[code]}`).join("; ")
