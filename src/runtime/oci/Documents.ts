/**
 * The JSON documents a registry sends (Registry.ts), and the credentials file it reads, as Schemas: a manifest, an
 * index or manifest list, a descriptor, an image config, a token answer, an error body; the auth file. A registry
 * is the tenant's choice (the reference is theirs), so each is decoded before use, and one of another shape is a
 * clear ImagePullError, never a JavaScript error from deep inside a pull. Only what the runtime uses is declared;
 * other fields are ignored, as registries and image builders add their own. Also the layer cache's own `.json`
 * files (ImageCache.ts), which a crash may have left half-written.
 */
import { Either, ParseResult, Schema } from "effect"

const DIGEST = /^sha256:[a-f0-9]{64}$/

/** A JSON object, its fields read where used (a manifest's fields depend on its media type). */
export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const Descriptor = Schema.Struct({
  mediaType: Schema.optionalWith(Schema.String, { default: () => "" }),
  digest: Schema.String.pipe(Schema.pattern(DIGEST)),
  size: Schema.Number.pipe(Schema.int(), Schema.nonNegative())
})
export type Descriptor = typeof Descriptor.Type

/**
 * An entry of an OCI image index or a Docker manifest list: the platform it is for. Decoded keeping its other
 * fields (decodeIndexEntries): its descriptor is checked once it is the one chosen.
 */
export const IndexEntry = Schema.Struct({
  platform: Schema.optional(Schema.Struct({
    os: Schema.optional(Schema.String),
    architecture: Schema.optional(Schema.String),
    variant: Schema.optional(Schema.String)
  }))
})
export const IndexEntries = Schema.Array(IndexEntry)

const Strings = Schema.NullOr(Schema.Array(Schema.String))

/** What the runtime uses of an image config: its platform, and how to run it. */
export const ImageConfig = Schema.Struct({
  architecture: Schema.optional(Schema.String),
  os: Schema.optional(Schema.String),
  variant: Schema.optional(Schema.String),
  config: Schema.optional(Schema.NullOr(Schema.Struct({
    Env: Schema.optional(Strings),
    WorkingDir: Schema.optional(Schema.NullOr(Schema.String)),
    Entrypoint: Schema.optional(Strings),
    Cmd: Schema.optional(Strings),
    User: Schema.optional(Schema.NullOr(Schema.String))
  })))
})
export type ImageConfig = typeof ImageConfig.Type

/** A token service's answer (Docker's `token`, OAuth's `access_token`). */
export const TokenAnswer = Schema.Struct({ token: Schema.optional(Schema.Unknown), access_token: Schema.optional(Schema.Unknown) })

/** A registry's error body: `{errors: [{code, message}]}`. */
export const ErrorBody = Schema.Struct({ errors: Schema.optionalWith(Schema.Array(Schema.Struct({ code: Schema.optional(Schema.Unknown) })), { default: () => [] }) })

/** A Docker-style credentials file: `{"auths": {"host": {"auth": base64(user:pass)} | {"username", "password"}}}`. */
export const AuthFile = Schema.Struct({
  auths: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Unknown }), { default: () => ({}) })
})

/** A cached layer's `.json`: its unpacked size and files, its compressed size, the registries that served it. */
export const LayerInfo = Schema.Struct({
  bytes: Schema.Number,
  files: Schema.Number,
  compressed: Schema.Number,
  /** Registries (as references name them) that served the blob, its digest verified. */
  sources: Schema.Array(Schema.String)
})
export type LayerInfo = typeof LayerInfo.Type

/** What the cache's accounting reads of a layer's `.json` of any version (the oldest called its size `unpacked`). */
export const LayerUsage = Schema.Struct({ bytes: Schema.optional(Schema.Number), unpacked: Schema.optional(Schema.Number), files: Schema.optional(Schema.Number) })

/** Decodes `text` as JSON of `schema`: the value, or a one-line reason (for the operator's log). */
export const decodeJson = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(Schema.parseJson(schema), { errors: "first" })
  return (text: string): Either.Either<A, string> =>
    Either.mapLeft(decode(text), (e) => ParseResult.TreeFormatter.formatErrorSync(e).replace(/\s+/g, " ").slice(0, 300))
}

/** Decodes a value already parsed (an entry of a document) by `schema`. */
export const decodeValue = <A, I>(schema: Schema.Schema<A, I>) => Schema.decodeUnknownEither(schema, { errors: "first" })

/** An index's entries, each keeping its descriptor's fields for `Descriptor` to check. */
export const decodeIndexEntries = Schema.decodeUnknownEither(IndexEntries, { errors: "first", onExcessProperty: "preserve" })
