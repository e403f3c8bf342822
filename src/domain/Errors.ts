/**
 * The error model. Every non-2xx response body is the envelope
 * `{code, message, request_id, retryable, details?}`.
 *
 * Domain code fails with one class per HTTP status (`Conflict`, `NotFound`, ...), whose `code` is one of that
 * status's codes in the closed catalogue (ErrorCodes.ts). `apiError(Conflict, "invalid_sandbox_state", message)`
 * builds one typed with its code; each route declares what it can answer with, `failsWith(Conflict,
 * "invalid_sandbox_state", …)`, a transform whose encoded side is the envelope — so HttpApi refuses a handler
 * that can fail with a code its route does not declare, and the OpenAPI document lists every route's codes.
 */
import { HttpApiSchema } from "@effect/platform"
import { Effect, FiberRef, ParseResult, Schema } from "effect"
import { globalValue } from "effect/GlobalValue"
import { type CodeOf, codesOf, describeCodes, type ErrorStatus } from "./ErrorCodes.ts"

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

type ErrorFields = { readonly code: string; readonly message: string; readonly details?: ErrorDetails | undefined }

/** The fields of a status's error: its `code` is one of that status's codes (ErrorCodes.ts). */
const fieldsOf = <S extends ErrorStatus>(status: S) => ({
  code: Schema.Literal(...codesOf(status)),
  message: Schema.String,
  details: Schema.optional(ErrorDetails)
})

export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fieldsOf(400)) {
  static readonly status = 400
}
export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", fieldsOf(401)) {
  static readonly status = 401
}
export class PaymentRequired extends Schema.TaggedError<PaymentRequired>()("PaymentRequired", fieldsOf(402)) {
  static readonly status = 402
}
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fieldsOf(403)) {
  static readonly status = 403
}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fieldsOf(404)) {
  static readonly status = 404
}
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", fieldsOf(405)) {
  static readonly status = 405
}
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fieldsOf(409)) {
  static readonly status = 409
}
export class Gone extends Schema.TaggedError<Gone>()("Gone", fieldsOf(410)) {
  static readonly status = 410
}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fieldsOf(413)) {
  static readonly status = 413
}
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", fieldsOf(415)) {
  static readonly status = 415
}
export class RangeNotSatisfiable extends Schema.TaggedError<RangeNotSatisfiable>()("RangeNotSatisfiable", fieldsOf(416)) {
  static readonly status = 416
}
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", fieldsOf(422)) {
  static readonly status = 422
}
export class UpgradeRequired extends Schema.TaggedError<UpgradeRequired>()("UpgradeRequired", fieldsOf(426)) {
  static readonly status = 426
}
export class TooManyRequests extends Schema.TaggedError<TooManyRequests>()("TooManyRequests", fieldsOf(429)) {
  static readonly status = 429
}
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", fieldsOf(500)) {
  static readonly status = 500
}
export class BadGateway extends Schema.TaggedError<BadGateway>()("BadGateway", fieldsOf(502)) {
  static readonly status = 502
}
export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()("ServiceUnavailable", fieldsOf(503)) {
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
  | Gone
  | PayloadTooLarge
  | UnsupportedMediaType
  | RangeNotSatisfiable
  | UpgradeRequired
  | Unprocessable
  | TooManyRequests
  | InternalError
  | BadGateway
  | ServiceUnavailable

/** An error class of one status: what `apiError` builds and `failsWith` declares. */
type ApiErrorClass<S extends ErrorStatus, Self extends ErrorFields, I = unknown> = Schema.Schema<Self, I> & {
  readonly status: S
  readonly _tag: string
  new(props: { readonly code: CodeOf<S>; readonly message: string; readonly details?: ErrorDetails | undefined }): Self
}

/** An error whose code is known to be one of `C`: what a route declares it can answer with. */
export type Coded<E, C extends string> = E & { readonly code: C }

/**
 * An error of `cls`'s status with this code, typed with the code itself, so that a route's declared codes
 * (`failsWith`) are checked against what its handler can fail with.
 */
export const apiError = <S extends ErrorStatus, Self extends ErrorFields, I, const C extends CodeOf<S>>(
  cls: ApiErrorClass<S, Self, I>,
  code: C,
  message: string,
  details?: ErrorDetails
): Coded<Self, C> => new cls(details === undefined ? { code, message } : { code, message, details }) as Coded<Self, C>

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

/** The envelope as sent for a route's errors of one status: its `code` is documented as one of `codes`. */
const envelopeOf = (codes: ReadonlyArray<string>) =>
  Schema.Struct({
    ...Envelope.fields,
    // A string at run time (an error never becomes a 500 for its code); the document lists the route's codes.
    code: Schema.String.annotations({ jsonSchema: { type: "string", enum: [...codes] } })
  })

/**
 * What a route can answer with under `cls`'s status: these codes and no other. The encoded side is the envelope
 * (with the class's status, `retryable` from it); HttpApi checks that the route's handler fails only with errors
 * of these codes, and the OpenAPI document lists them on the route.
 */
export const failsWith = <S extends ErrorStatus, Self extends ErrorFields, I, const C extends ReadonlyArray<CodeOf<S>>>(
  cls: ApiErrorClass<S, Self, I>,
  ...codes: C
): Schema.Schema<Coded<Self, C[number]>, Envelope> =>
  // `instanceOf`, not the class's own type schema: that carries the class's identifier, and the document would then
  // show one shared schema (one route's codes) for every route instead of each route's own.
  Schema.transformOrFail(envelopeOf(codes), Schema.instanceOf(cls), {
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
  }).annotations(HttpApiSchema.annotations({ status: cls.status, description: describeCodes(cls.status, codes) })) as unknown as Schema.Schema<
    Coded<Self, C[number]>,
    Envelope
  >

// Small constructors for the codes used everywhere.
export const notFound = (what: string) => apiError(NotFound, "not_found", `${what} not found`)
export const forbidden = (message = "You do not have permission to do this") => apiError(Forbidden, "forbidden", message)
export const unauthenticated = (message = "Missing or invalid credentials") => apiError(Unauthenticated, "unauthenticated", message)
export const conflict = <const C extends CodeOf<409>>(code: C, message: string, details?: ErrorDetails) => apiError(Conflict, code, message, details)
export const validationError = (message: string, issues: ReadonlyArray<{ path: string; message: string }>) =>
  apiError(Unprocessable, "validation_error", message, { issues })
export const badRequest = <const C extends CodeOf<400>>(code: C, message: string) => apiError(BadRequest, code, message)

