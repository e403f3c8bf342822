/**
 * Execution ids that need no memory: an adapter that can find an execution again from a few parts (a session and
 * a command, a process name and an output limit) puts them in the id, so `execEvents` works after a gateway
 * restart. The id is `<prefix>:` + base64url(JSON array of the parts, in the order the parts schema names its
 * fields): the form every adapter wrote by hand before this codec, so ids already stored still decode.
 *
 *   const executionIds = executionIdCodec("runloop", "runloop", Schema.Struct({ executionId: NonEmptyString, maxOutputBytes: ... }))
 *   executionIds.encode({ executionId: "exe_1", maxOutputBytes: 1024 })  // "runloop:WyJleGVfMSIsMTAyNF0"
 *   executionIds.decode(id)  // Effect of the parts, or an `invalid_request` ProviderError saying why not
 *
 * Execution ids come back from our own database, but they are decoded as any outside input is: a malformed one is
 * a clear failure, never a crash or a half-read part. A trailing part that an older id lacks takes the default its
 * schema gives (`Schema.optionalWith(…, { default })`).
 */
import { Effect, Either, ParseResult, Schema } from "effect"
import { providerFailure } from "../../src/providers/errors.ts"
import type { ProviderError, ProviderName } from "../../src/providers/Provider.ts"

/** The id's body: base64url of a JSON array. */
const Body = Schema.compose(Schema.StringFromBase64Url, Schema.parseJson(Schema.Array(Schema.Unknown)))

/** A non-empty string part (ids, names). */
export const IdPart = Schema.String.pipe(Schema.minLength(1))

/** A positive whole-number part (a byte limit, a timeout) that an older id may lack: `fallback` then. */
export const positivePart = (fallback: number) => Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => fallback })

export interface ExecutionIdCodec<A> {
  /** The id for these parts. */
  readonly encode: (parts: A) => string
  /** The parts of an id, or why it is not one of this codec's (one line). */
  readonly parse: (executionId: string) => Either.Either<A, string>
  /** The parts of an id, or an `invalid_request` failure of the provider saying why it is not one of its ids. */
  readonly decode: (executionId: string) => Effect.Effect<A, ProviderError>
  /** Whether the id has this codec's prefix (an adapter with two kinds of execution tells them apart by it). */
  readonly owns: (executionId: string) => boolean
}

export const executionIdCodec = <A, I extends Readonly<Record<string, unknown>>>(
  provider: ProviderName,
  prefix: string,
  parts: Schema.Schema<A, I, never> & { readonly fields: Schema.Struct.Fields }
): ExecutionIdCodec<A> => {
  const head = `${prefix}:`
  const keys = Object.keys(parts.fields)
  const decodeParts = Schema.decodeUnknownEither(parts, { onExcessProperty: "error" })
  const encodeParts = Schema.encodeSync(parts)
  const decodeBody = Schema.decodeUnknownEither(Body)
  const encodeBody = Schema.encodeSync(Body)
  const fail = providerFailure(provider)
  const reason = (e: ParseResult.ParseError) => ParseResult.TreeFormatter.formatErrorSync(e).replace(/\s+/g, " ").slice(0, 200)

  const parse = (executionId: string): Either.Either<A, string> => {
    if (!executionId.startsWith(head)) return Either.left(`it does not start with "${head}"`)
    const values = decodeBody(executionId.slice(head.length))
    if (Either.isLeft(values)) return Either.left(`its body is not base64url of a JSON array: ${reason(values.left)}`)
    if (values.right.length > keys.length) return Either.left(`it has ${values.right.length} parts, at most ${keys.length} expected`)
    const named = Object.fromEntries(values.right.map((v, i) => [keys[i]!, v]))
    return Either.mapLeft(decodeParts(named), (e) => `its parts are not (${keys.join(", ")}): ${reason(e)}`)
  }

  return {
    encode: (value) => {
      const encoded = encodeParts(value)
      return `${head}${encodeBody(keys.map((k) => encoded[k]))}`
    },
    parse,
    decode: (executionId) =>
      Either.match(parse(executionId), {
        onLeft: (why) => Effect.fail(fail("invalid_request", `${executionId.slice(0, 200)} is not a ${provider} execution id (${head}…): ${why}`)),
        onRight: Effect.succeed
      }),
    owns: (executionId) => executionId.startsWith(head)
  }
}
