/**
 * The HTTP half of every adapter: send a request with a deadline, turn what went wrong into a `ProviderError`
 * of the right kind, decode a body with a Schema. An adapter supplies only what is its provider's own: how an
 * error answer reads (its body's message and codes) — statuses and transport failures are classified here, the
 * same way for every provider (`errors.ts`).
 *
 *   const wire = makeWire({ provider: "acme", client, timeout: "60 seconds", classify: acmeErrors })
 *   wire.call(HttpClientRequest.get(`${base}/vms/1`), AcmeVm, "get vm")   // Effect<AcmeVm, ProviderError>
 */
import { FetchHttpClient, HttpClient, type HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Duration, Effect, Layer, Schema, Stream } from "effect"
import { kindOfStatus, kindOfTransportFailure, providerFailure } from "../../src/providers/errors.ts"
import type { ProviderError, ProviderErrorKind, ProviderName } from "../../src/providers/Provider.ts"
import { passedOn } from "../../src/domain/Bodies.ts"

/** How one call is made. Adapters may add fields of their own (read back in their `classify`). */
export interface CallOptions {
  /** The call changes state at the provider (default: any method but GET): a lost answer is an unknown outcome. */
  readonly mutating?: boolean | undefined
  /** A 500/502/504 answer may still have taken effect (creates): the kind is then `unknown_outcome`. */
  readonly ambiguous?: boolean | undefined
  /** Statuses outside 2xx that are an answer, not an error (e.g. 416 for a read past the end). */
  readonly accept?: ((status: number) => boolean) | undefined
}

/** An error answer as the provider sent it. `json` is undefined when the body is not JSON (a proxy's page). */
export interface ErrorAnswer {
  readonly status: number
  readonly text: string
  readonly json: unknown
}

/** What an adapter reads from an error answer: a message, and a kind when the body says more than the status. */
export interface Classified {
  readonly message: string
  readonly kind?: ProviderErrorKind | undefined
  /** A provider code worth keeping in the message (e.g. `NO_AVAILABLE_RUNNERS`). */
  readonly code?: string | undefined
}

export interface WireOptions<O extends CallOptions> {
  readonly provider: ProviderName
  readonly client: HttpClient.HttpClient
  readonly timeout: Duration.DurationInput
  readonly classify?: ((answer: ErrorAnswer, call: O & { readonly what: string }) => Classified) | undefined
}

/**
 * The HTTP client adapters speak through unless given one: @effect/platform's fetch client with decompression off.
 * What a provider answers carries what its sandboxes hold (files, output), and a body is bounded by the bytes that
 * came, not by what they inflate to: fetch would otherwise ask for compression (Accept-Encoding) and inflate any
 * answer that declares it, behind a Content-Length or a cap that saw only the compressed bytes. `send` refuses an
 * answer that declares a Content-Encoding all the same (nobody asked for one).
 */
export const plainHttpClient = (): HttpClient.HttpClient =>
  Effect.runSync(Effect.provide(HttpClient.HttpClient, FetchHttpClient.layer.pipe(Layer.provide(Layer.succeed(FetchHttpClient.RequestInit, { decompress: false } as RequestInit)))))

/** The answer's Content-Encoding when it declares one (`identity` is none). */
const encodingOf = (headers: Readonly<Record<string, string | undefined>>) => {
  const encoding = headers["content-encoding"]?.trim()
  return encoding === undefined || encoding === "" || encoding.toLowerCase() === "identity" ? undefined : encoding
}

/** The first 300 characters of a body: enough to say what went wrong, never a whole page. */
export const snippet = (text: string) => text.slice(0, 300)

/** A JSON body's `message` when it is a string (or a list of strings), else the text. */
export const messageOf = (answer: ErrorAnswer): string => {
  const message = (answer.json as { message?: unknown } | null | undefined)?.message
  if (typeof message === "string") return message
  if (Array.isArray(message) && message.every((m) => typeof m === "string")) return message.join(", ")
  return snippet(answer.text)
}

export interface Wire<O extends CallOptions> {
  readonly fail: (kind: ProviderErrorKind, message: string, status?: number) => ProviderError
  /** Sends; a 2xx (or an accepted status) is the response, anything else a classified `ProviderError`. */
  readonly send: (request: HttpClientRequest.HttpClientRequest, what: string, options?: O) => Effect.Effect<HttpClientResponse.HttpClientResponse, ProviderError>
  /** Decodes a response's JSON body; a body of another shape means the provider is not what we expect. */
  readonly decode: <A, I>(schema: Schema.Schema<A, I>, what: string) => (response: HttpClientResponse.HttpClientResponse) => Effect.Effect<A, ProviderError>
  /** `send` then `decode`. */
  readonly call: <A, I>(request: HttpClientRequest.HttpClientRequest, schema: Schema.Schema<A, I>, what: string, options?: O) => Effect.Effect<A, ProviderError>
}

export const makeWire = <O extends CallOptions = CallOptions>(options: WireOptions<O>): Wire<O> => {
  const name = options.provider
  const fail = providerFailure(name)
  const timeout = Duration.decode(options.timeout)
  const classify = options.classify ?? ((answer: ErrorAnswer): Classified => ({ message: messageOf(answer) }))

  const errorOf = (response: HttpClientResponse.HttpClientResponse, what: string, call: O) =>
    Effect.map(Effect.orElseSucceed(response.text, () => ""), (text) => {
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch {
        // not JSON: the status says enough
      }
      const classified = classify({ status: response.status, text, json }, { ...call, what })
      const kind = classified.kind ?? kindOfStatus(response.status, { ambiguous: call.ambiguous === true })
      return fail(kind, `${name} ${what} answered ${response.status}${classified.code ? ` ${classified.code}` : ""}: ${classified.message}`, response.status)
    })

  const send: Wire<O>["send"] = (request, what, call = {} as O) => {
    const mutating = call.mutating ?? request.method !== "GET"
    return options.client.execute(request).pipe(
      Effect.mapError((e) => fail(kindOfTransportFailure(e, { mutating }), `${name} ${what} failed: ${e.message}`)),
      Effect.timeoutFail({ duration: timeout, onTimeout: () => fail(kindOfTransportFailure("timeout", { mutating }), `${name} ${what} timed out`) }),
      Effect.flatMap((response) => {
        // Never asked for (plainHttpClient): its body is not read, so it is never inflated (see there).
        const encoding = encodingOf(response.headers)
        if (encoding !== undefined) return Effect.fail(fail("unavailable", `${name} ${what} answered with Content-Encoding ${encoding.slice(0, 40)}, which was not asked for`, response.status))
        return (response.status >= 200 && response.status < 300) || call.accept?.(response.status) === true
          ? Effect.succeed(response)
          : Effect.flatMap(errorOf(response, what, call), Effect.fail)
      })
    )
  }

  const decode: Wire<O>["decode"] = (schema, what) => (response) =>
    response.json.pipe(
      Effect.flatMap(Schema.decodeUnknown(schema)),
      Effect.mapError((e) => fail("unavailable", `${name} ${what} sent an unexpected body: ${e.message}`))
    )

  return { fail, send, decode, call: (request, schema, what, call) => Effect.flatMap(send(request, what, call), decode(schema, what)) }
}

/**
 * A response's whole body, failing as soon as it passes `cap` bytes: before reading when its Content-Length says
 * so, else counted as it comes (a chunked answer states no length up front). `unreadable` when the stream breaks,
 * `tooLarge` past the cap.
 */
export const readBodyAtMost = (
  response: HttpClientResponse.HttpClientResponse,
  cap: number,
  failures: { readonly unreadable: (message: string) => ProviderError; readonly tooLarge: () => ProviderError }
): Effect.Effect<Uint8Array, ProviderError> =>
  Number(response.headers["content-length"] ?? "0") > cap ? Effect.fail(failures.tooLarge()) : Effect.map(
    response.stream.pipe(
      Stream.mapError((e) => failures.unreadable(e.message)),
      Stream.runFoldEffect({ chunks: [] as Array<Uint8Array>, size: 0 }, (acc, chunk) => {
        acc.chunks.push(chunk)
        acc.size += chunk.length
        return acc.size > cap ? Effect.fail(failures.tooLarge()) : Effect.succeed(acc)
      })
    ),
    ({ chunks }) => new Uint8Array(Buffer.concat(chunks))
  )

/**
 * A response's body as a web stream of exactly `length` bytes, passed on as it comes (one stage, no copy): more
 * than `length` errors the stream before it is passed on, and so does an end short of it (the file changed, or the
 * provider cut it). The stream's errors are Errors carrying the ProviderError's message.
 */
export const exactBody = (response: HttpClientResponse.HttpClientResponse, length: number, what: string): ReadableStream<Uint8Array> => {
  const web = fetchResponseOf(response)
  if (web === undefined || web.body === null) return exactStream(response, length, what)
  // Framed by a Content-Length of exactly `length`, fetch itself holds the body to it (an early end errors it,
  // nothing past it is read): passed on as it is, without a JavaScript stage (flat memory, native speed). Not when
  // the answer is encoded (`send` refuses that; a client of another's making may have inflated it): the length
  // then holds the encoded bytes only, and the body is counted as it comes, after decoding.
  if (web.headers.get("content-length") === String(length) && !web.headers.has("transfer-encoding") && encodingOf(response.headers) === undefined) {
    return keeping(web.body, response)
  }
  let received = 0
  const wrong = (message: string) => new Error(`${what}: ${message}`)
  return web.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
    // Held while the body streams (see `keeping`).
    ...{ response },
    transform: (chunk, controller) => {
      received += chunk.length
      passedOn(chunk.length)
      if (received > length) controller.error(wrong(`more than the ${length} bytes asked for`))
      else controller.enqueue(chunk)
    },
    flush: (controller) => {
      if (received !== length) controller.error(wrong(`${received} of ${length} bytes`))
    }
  }))
}

/**
 * `body`, holding `response` for as long as it is itself held: the fetch client aborts a request whose response
 * object is collected, and the body outlives the Effect that got it.
 */
const keeping = (body: ReadableStream<Uint8Array>, response: HttpClientResponse.HttpClientResponse) =>
  Object.defineProperty(body, KEPT, { value: response })
const KEPT = Symbol("the response this body belongs to")

/** The fetch Response under a response of @effect/platform's fetch client (unwrapped from its interruptible wrapper). */
const fetchResponseOf = (response: HttpClientResponse.HttpClientResponse): Response | undefined => {
  const original: unknown = (response as { readonly original?: unknown }).original ?? response
  const source = (original as { readonly source?: unknown }).source
  return source instanceof Response && !source.bodyUsed ? source : undefined
}

/** `exactBody` of a response of another kind of client, through its Effect stream. */
const exactStream = (response: HttpClientResponse.HttpClientResponse, length: number, what: string): ReadableStream<Uint8Array> => {
  let received = 0
  const wrong = (message: string) => Stream.fail(new Error(`${what}: ${message}`))
  return Stream.toReadableStream(
    response.stream.pipe(
      Stream.mapError((e) => new Error(`${what}: ${e.message}`)),
      Stream.mapChunksEffect((chunk) => {
        for (const bytes of chunk) {
          received += bytes.length
          passedOn(bytes.length)
        }
        return received > length ? Effect.fail(new Error(`${what}: more than the ${length} bytes asked for`)) : Effect.succeed(chunk)
      }),
      Stream.concat(Stream.suspend(() => (received === length ? Stream.empty : wrong(`${received} of ${length} bytes`))))
    )
  )
}

/** A read of `length` bytes from `offset` answered from a whole file's bytes (a wire without ranges, or one that left the range out). */
export const rangeOfWhole = (body: Uint8Array, offset: number, length: number) => {
  const data = body.subarray(Math.min(offset, body.length), Math.min(body.length, offset + length))
  return { data, offsetBytes: offset, sizeBytes: body.length, eof: offset + data.length >= body.length }
}
