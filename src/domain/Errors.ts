/**
 * The error model. Every non-2xx response body is the envelope
 * `{code, message, request_id, retryable, details?}`.
 *
 * Domain code fails with one class per HTTP status (`Conflict`, `NotFound`, ...), each carrying a stable
 * snake_case `code`. The HttpApi declares `wire(Class)`: a transform whose encoded side is the envelope,
 * so handlers `yield* new Conflict({ code: "api_key_must_be_revoked", message })` and the body comes out right.
 */
import { HttpApiSchema } from "@effect/platform"
import { Effect, FiberRef, ParseResult, Schema } from "effect"
import { globalValue } from "effect/GlobalValue"

export const ErrorDetails = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type ErrorDetails = typeof ErrorDetails.Type

/** The error object embedded in resources (spec §2.2). */
export const ErrorObject = Schema.Struct({
  code: Schema.String,
  message: Schema.String,
  retryable: Schema.Boolean,
  details: Schema.optional(ErrorDetails)
}).annotations({ identifier: "ErrorObject" })
export type ErrorObject = typeof ErrorObject.Type

/** The request id of the request being served; set by the outermost HTTP middleware. */
export const CurrentRequestId = globalValue("app/CurrentRequestId", () => FiberRef.unsafeMake("req_unknown"))

const fields = {
  code: Schema.String,
  message: Schema.String,
  details: Schema.optional(ErrorDetails)
}

type ErrorFields = { readonly code: string; readonly message: string; readonly details?: ErrorDetails | undefined }
type ApiErrorClass<Self, I> = Schema.Schema<Self, I> & {
  readonly status: number
  readonly _tag: string
}

export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {
  static readonly status = 400
}
export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", fields) {
  static readonly status = 401
}
export class PaymentRequired extends Schema.TaggedError<PaymentRequired>()("PaymentRequired", fields) {
  static readonly status = 402
}
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields) {
  static readonly status = 403
}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {
  static readonly status = 404
}
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", fields) {
  static readonly status = 405
}
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fields) {
  static readonly status = 409
}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {
  static readonly status = 413
}
export class RangeNotSatisfiable extends Schema.TaggedError<RangeNotSatisfiable>()("RangeNotSatisfiable", fields) {
  static readonly status = 416
}
export class UpgradeRequired extends Schema.TaggedError<UpgradeRequired>()("UpgradeRequired", fields) {
  static readonly status = 426
}
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", fields) {
  static readonly status = 415
}
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", fields) {
  static readonly status = 422
}
export class TooManyRequests extends Schema.TaggedError<TooManyRequests>()("TooManyRequests", fields) {
  static readonly status = 429
}
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", fields) {
  static readonly status = 500
}
export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()("ServiceUnavailable", fields) {
  static readonly status = 503
}

export type ApiError =
  | BadRequest
  | Unauthenticated
  | PaymentRequired
  | Forbidden
  | NotFound
  | MethodNotAllowed
  | Conflict
  | PayloadTooLarge
  | UnsupportedMediaType
  | RangeNotSatisfiable
  | UpgradeRequired
  | Unprocessable
  | TooManyRequests
  | InternalError
  | ServiceUnavailable

/** Only server-side failures and rate limits are worth retrying unchanged. */
export const isRetryableStatus = (status: number) => status >= 500 || status === 429

export const Envelope = Schema.Struct({
  code: Schema.String,
  message: Schema.String,
  request_id: Schema.String,
  retryable: Schema.Boolean,
  details: Schema.optional(ErrorDetails)
})
export type Envelope = typeof Envelope.Type

/** The declared (wire) form of an error class: encodes to the envelope with the class's HTTP status. */
export const wire = <Self extends ErrorFields, I>(
  cls: ApiErrorClass<Self, I>,
  description: string
) =>
  Schema.transformOrFail(Envelope, Schema.typeSchema(cls), {
    strict: true,
    decode: (b) => ParseResult.decodeUnknown(cls)({ _tag: cls._tag, code: b.code, message: b.message, details: b.details }),
    encode: (e) =>
      Effect.map(FiberRef.get(CurrentRequestId), (request_id) => ({
        code: e.code,
        message: e.message,
        request_id,
        retryable: isRetryableStatus(cls.status),
        ...(e.details !== undefined ? { details: e.details } : {})
      }))
  }).annotations(HttpApiSchema.annotations({ status: cls.status, identifier: `${cls._tag}Error`, description }))

export const BadRequestWire = wire(BadRequest, "Unparseable JSON, a missing required header or Idempotency-Key")
export const UnauthenticatedWire = wire(Unauthenticated, "Missing, unknown, revoked or expired credential (`unauthenticated`)")
export const PaymentRequiredWire = wire(PaymentRequired, "The organization has no credit left (`insufficient_credits`)")
export const ForbiddenWire = wire(Forbidden, "The credential may not do this (`forbidden`)")
export const NotFoundWire = wire(NotFound, "No such resource visible to this credential, or no such route (`not_found`)")
export const MethodNotAllowedWire = wire(MethodNotAllowed, "The route exists but not with this method (`method_not_allowed`)")
export const ConflictWire = wire(Conflict, "The request conflicts with the current state (see `code`)")
export const PayloadTooLargeWire = wire(PayloadTooLarge, "The request body is larger than the server accepts (`payload_too_large`)")
export const RangeNotSatisfiableWire = wire(RangeNotSatisfiable, "The Range is malformed or outside the file (`range_not_satisfiable`; `Content-Range: bytes */<size>`)")
export const UpgradeRequiredWire = wire(UpgradeRequired, "The route is a WebSocket: connect with `Upgrade: websocket` (`upgrade_required`)")
export const UnsupportedMediaTypeWire = wire(UnsupportedMediaType, "The request body is not `application/json` (`unsupported_media_type`)")
export const UnprocessableWire = wire(Unprocessable, "The request failed validation (`validation_error`, with `details.issues`)")
export const TooManyRequestsWire = wire(TooManyRequests, "Too much is already waiting on this resource (`too_many_requests`, with `details.limit`); retry once some of it has finished")
export const InternalErrorWire = wire(InternalError, "An unexpected server error (`internal_error`); retryable")
export const ServiceUnavailableWire = wire(ServiceUnavailable, "A dependency is unavailable (`service_unavailable`); retryable")

// Small constructors for the codes used everywhere.
export const notFound = (what: string) => new NotFound({ code: "not_found", message: `${what} not found` })
export const forbidden = (message = "You do not have permission to do this") => new Forbidden({ code: "forbidden", message })
export const unauthenticated = (message = "Missing or invalid credentials") =>
  new Unauthenticated({ code: "unauthenticated", message })
export const conflict = (code: string, message: string, details?: ErrorDetails) =>
  new Conflict(details === undefined ? { code, message } : { code, message, details })
export const validationError = (message: string, issues: ReadonlyArray<{ path: string; message: string }>) =>
  new Unprocessable({ code: "validation_error", message, details: { issues } })
export const badRequest = (code: string, message: string) => new BadRequest({ code, message })
