/**
 * A client of the OCI distribution API (what `docker pull` speaks): manifests by tag or digest (OCI image indexes
 * and Docker manifest lists resolved to this host's platform; OCI and Docker schema 2 image manifests), blobs
 * streamed with their digest verified. Authentication as Docker does it: anonymous or basic credentials traded for
 * a bearer token at the realm a 401 names (Docker Hub's flow), or basic credentials where a registry asks for them.
 * Credentials come from a Docker-style auth file (`REGISTRY_AUTH_FILE`: `{"auths": {"host": {"auth": base64(user:pass)}}}`):
 * the operator's, used by every pull that names that registry.
 *
 * Every request is a tenant's (the reference is theirs), so every one passes the gateway's outbound address policy
 * (src/net/): the manifest and blob requests, each redirect (at most 5, each checked again; credentials dropped
 * when one leaves the registry's origin) and the token realm, which must be https or on the registry's own host.
 * Loopback, private and link-local addresses only with REGISTRY_ALLOW_PRIVATE (or for the registries of
 * REGISTRY_PRIVATE_HOSTS); plain HTTP only for registries on loopback.
 */
import { Either } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { type CheckedFetchOptions, fetchChecked, OutboundRefused } from "../../net/Fetch.ts"
import type { AddressPolicy } from "../../net/Targets.ts"
import { AuthFile, decodeIndexEntries, decodeJson, decodeValue, Descriptor, ErrorBody, ImageConfig, JsonObject, TokenAnswer } from "./Documents.ts"
import { ImagePullError } from "./Errors.ts"
import { type ImageReference, isLoopback, type Platform, platformMatches, platformString, registryBaseUrl } from "./Reference.ts"

export const MEDIA = {
  ociIndex: "application/vnd.oci.image.index.v1+json",
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json"
} as const

const ACCEPT = [MEDIA.ociIndex, MEDIA.ociManifest, MEDIA.dockerList, MEDIA.dockerManifest].join(", ")
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024
const MAX_CONFIG_BYTES = 4 * 1024 * 1024
const MANIFEST_TIMEOUT_MS = 30_000
/** A blob download may stall this long between two chunks. */
const BLOB_IDLE_MS = 60_000
/** Redirects one request may follow (blob stores, mirrors); each is checked as a request of its own. */
export const MAX_REDIRECTS = 5
const DIGEST = /^sha256:[a-f0-9]{64}$/

export type { Descriptor, ImageConfig } from "./Documents.ts"

export interface ImageManifest {
  /** Digest of the manifest itself (what `image@sha256:…` names). */
  readonly digest: string
  readonly config: Descriptor
  readonly layers: ReadonlyArray<Descriptor>
}

const decodeAuthFile = decodeJson(AuthFile)
const decodeToken = decodeJson(TokenAnswer)
const decodeErrors = decodeJson(ErrorBody)
const decodeManifest = decodeJson(JsonObject)
const decodeConfig = decodeJson(ImageConfig)
const decodeDescriptor = decodeValue(Descriptor)

interface AuthEntry {
  readonly username: string
  readonly password: string
}

/** Credentials for `registry` from a Docker-style auth file (docker.io also under Docker's index URL). */
export const credentialsFor = (authFile: string | undefined, registry: string): AuthEntry | undefined => {
  if (authFile === undefined || authFile === "") return undefined
  let text: string
  try {
    text = fs.readFileSync(authFile, "utf8")
  } catch (e) {
    throw new ImagePullError("unauthorized", "the registry credentials file (REGISTRY_AUTH_FILE) cannot be read", (e as Error).message)
  }
  const decoded = decodeAuthFile(text)
  if (Either.isLeft(decoded)) throw new ImagePullError("unauthorized", "the registry credentials file (REGISTRY_AUTH_FILE) cannot be read", decoded.left)
  const auths = decoded.right.auths as Record<string, { auth?: unknown; username?: unknown; password?: unknown } | undefined>
  const keys = registry === "docker.io" ? ["docker.io", "index.docker.io", "registry-1.docker.io", "https://index.docker.io/v1/"] : [registry, `https://${registry}`, `http://${registry}`]
  for (const key of keys) {
    const entry = auths[key]
    if (entry === undefined || typeof entry !== "object" || entry === null) continue
    if (typeof entry.username === "string" && typeof entry.password === "string") return { username: entry.username, password: entry.password }
    if (typeof entry.auth === "string") {
      const decoded = Buffer.from(entry.auth, "base64").toString("utf8")
      const colon = decoded.indexOf(":")
      if (colon > 0) return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) }
    }
  }
  return undefined
}

/** `Bearer realm="…",service="…",scope="…"` → its scheme and parameters. */
const parseChallenge = (header: string): { scheme: string; params: Record<string, string> } => {
  const space = header.indexOf(" ")
  const scheme = (space < 0 ? header : header.slice(0, space)).toLowerCase()
  const params: Record<string, string> = {}
  for (const m of header.slice(space + 1).matchAll(/(\w+)="([^"]*)"/g)) params[m[1]!.toLowerCase()] = m[2]!
  return { scheme, params }
}

const sha256 = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`

/** Reads at most `max` bytes of a body; more is an error. */
const boundedBody = async (response: Response, max: number, what: string): Promise<Uint8Array> => {
  const declared = Number(response.headers.get("content-length") ?? "0")
  if (declared > max) throw new ImagePullError("invalid_image", `the registry sent an oversized ${what}`)
  const chunks: Array<Uint8Array> = []
  let size = 0
  if (response.body === null) return new Uint8Array()
  for await (const chunk of response.body) {
    size += chunk.length
    if (size > max) throw new ImagePullError("invalid_image", `the registry sent an oversized ${what}`)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}

export interface RegistryClientOptions {
  readonly authFile?: string | undefined
  /** The address policy every request passes (REGISTRY_ALLOW_PRIVATE, REGISTRY_PRIVATE_HOSTS, REGISTRY_DNS_SERVERS). */
  readonly policy: AddressPolicy
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308])

export const makeRegistryClient = (ref: ImageReference, options: RegistryClientOptions) => {
  const base = registryBaseUrl(ref.registry)
  if (base.startsWith("http://") && !isLoopback(ref.registry)) throw new ImagePullError("unsupported", "plain HTTP registries are allowed only on loopback")
  const credentials = credentialsFor(options.authFile, ref.registry)
  let authorization: string | undefined
  const scope = `repository:${ref.repository}:pull`
  const checked = (maxRedirects: number): CheckedFetchOptions => ({
    policy: options.policy,
    maxRedirects,
    refuseUrl: (url) => (url.protocol === "http:" && !isLoopback(url.host) ? `plain HTTP is allowed only on loopback, not for ${url.host}` : undefined)
  })

  /** A failed request in the pull's terms: refused by the address policy, or the registry unreachable. */
  const pullError = (e: unknown) => {
    if (e instanceof ImagePullError) return e
    if (e instanceof OutboundRefused && e.kind === "refused") return new ImagePullError("forbidden_address", `a request of the pull was refused: ${e.message}`)
    if (e instanceof OutboundRefused) return new ImagePullError("unreachable", `the registry ${ref.registry} cannot be reached: ${e.message}`)
    return new ImagePullError("unreachable", `the registry ${ref.registry} cannot be reached`, e instanceof Error ? e.message : String(e))
  }

  /** One request through the policy; a redirect is followed (up to MAX_REDIRECTS) unless `follow` is false. */
  const send = (url: string, accept: string | undefined, signal: AbortSignal, method: "GET" | "HEAD", follow: boolean) =>
    fetchChecked(url, {
      method,
      headers: { ...(accept !== undefined ? { accept } : {}), ...(authorization !== undefined ? { authorization } : {}), "user-agent": "sandbox-gateway" },
      signal
    }, checked(follow ? MAX_REDIRECTS : 0)).catch((e: unknown) => {
      throw pullError(e)
    })

  /** Answers a 401's challenge: a bearer token from its realm, or basic credentials. False when nothing helps. */
  const authenticate = async (challenge: string, signal: AbortSignal): Promise<boolean> => {
    const { params, scheme } = parseChallenge(challenge)
    const basic = credentials === undefined ? undefined : `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64")}`
    if (scheme === "basic") {
      if (basic === undefined || authorization === basic) return false
      authorization = basic
      return true
    }
    if (scheme !== "bearer" || params["realm"] === undefined) return false
    let realm: URL
    try {
      realm = new URL(params["realm"])
    } catch {
      return false
    }
    // The realm is a request the registry makes us send, credentials included: https, or the registry's own host.
    if (realm.protocol !== "https:" && !(realm.protocol === "http:" && base.startsWith("http:") && realm.hostname === new URL(base).hostname)) {
      throw new ImagePullError("forbidden_address", `the registry ${ref.registry} names a token realm that is neither https nor on its own host`)
    }
    if (params["service"] !== undefined) realm.searchParams.set("service", params["service"])
    realm.searchParams.set("scope", scope)
    const response = await fetchChecked(realm, { headers: basic !== undefined ? { authorization: basic } : {}, signal }, checked(MAX_REDIRECTS)).catch((e: unknown) => {
      throw pullError(e)
    })
    if (!response.ok) {
      if (response.status === 401 || response.status === 403) {
        throw new ImagePullError(
          "unauthorized",
          basic === undefined ? `${ref.display} does not exist or needs credentials (REGISTRY_AUTH_FILE)` : `the registry ${ref.registry} refused the credentials of REGISTRY_AUTH_FILE`
        )
      }
      return false
    }
    const body = Either.getOrElse(decodeToken(Buffer.from(await boundedBody(response, 1024 * 1024, "token")).toString("utf8")), () => ({ token: undefined, access_token: undefined }))
    const token = typeof body.token === "string" ? body.token : typeof body.access_token === "string" ? body.access_token : undefined
    if (token === undefined) return false
    const next = `Bearer ${token}`
    if (next === authorization) return false
    authorization = next
    return true
  }

  /** A request with authentication: a 401 is answered once (token or credentials), then retried. */
  const request = async (path: string, accept: string | undefined, signal: AbortSignal, method: "GET" | "HEAD" = "GET", follow = true): Promise<Response> => {
    const url = `${base}/v2/${ref.repository}/${path}`
    let response = await send(url, accept, signal, method, follow)
    if (response.status === 401) {
      const challenge = response.headers.get("www-authenticate")
      await response.body?.cancel()
      if (challenge !== null && (await authenticate(challenge, signal))) response = await send(url, accept, signal, method, follow)
    }
    return response
  }

  /** The registry's error codes (NAME_UNKNOWN, MANIFEST_UNKNOWN …), when its body says. */
  const errorCodes = async (response: Response): Promise<Array<string>> => {
    try {
      const body = Either.getOrElse(decodeErrors(Buffer.from(await boundedBody(response, 64 * 1024, "error")).toString("utf8")), () => ({ errors: [] }))
      return body.errors.flatMap((e) => (typeof e.code === "string" ? [e.code] : []))
    } catch {
      return []
    }
  }

  const failed = async (response: Response, what: "manifest" | "blob"): Promise<never> => {
    const codes = await errorCodes(response)
    if (response.status === 401 || response.status === 403 || codes.includes("UNAUTHORIZED") || codes.includes("DENIED")) {
      // Docker Hub answers an unknown repository as it answers a private one.
      throw new ImagePullError("unauthorized", `${ref.display} does not exist or needs credentials (REGISTRY_AUTH_FILE)`)
    }
    if (response.status === 404) {
      if (codes.includes("NAME_UNKNOWN")) throw new ImagePullError("unknown_image", `the registry ${ref.registry} has no image ${ref.repository}`)
      if (what === "manifest") {
        throw new ImagePullError("unknown_tag", ref.digest !== undefined ? `${ref.display}: no such digest` : `${ref.display}: no such tag ${ref.tag ?? "latest"}`)
      }
      throw new ImagePullError("invalid_image", `${ref.display}: the registry is missing a blob of the image`)
    }
    throw new ImagePullError("unreachable", `the registry ${ref.registry} failed (HTTP ${response.status})`)
  }

  const fetchManifest = async (reference: string, expectedDigest: string | undefined) => {
    const signal = AbortSignal.timeout(MANIFEST_TIMEOUT_MS)
    const response = await request(`manifests/${reference}`, ACCEPT, signal)
    if (!response.ok) return failed(response, "manifest")
    const bytes = await boundedBody(response, MAX_MANIFEST_BYTES, "manifest")
    const digest = sha256(bytes)
    const announced = response.headers.get("docker-content-digest")
    if (expectedDigest !== undefined && digest !== expectedDigest) {
      throw new ImagePullError("digest_mismatch", `${ref.display}: the manifest does not match its digest`, `expected ${expectedDigest}, got ${digest}`)
    }
    if (expectedDigest === undefined && announced !== null && DIGEST.test(announced) && announced !== digest) {
      throw new ImagePullError("digest_mismatch", `${ref.display}: the manifest does not match the digest the registry announced`, `announced ${announced}, got ${digest}`)
    }
    const decoded = decodeManifest(Buffer.from(bytes).toString("utf8"))
    if (Either.isLeft(decoded)) throw new ImagePullError("invalid_image", `${ref.display}: the manifest is not a JSON object`, decoded.left)
    const body = decoded.right
    const mediaType = typeof body["mediaType"] === "string" ? body["mediaType"] : (response.headers.get("content-type") ?? "").split(";")[0]!.trim()
    return { digest, mediaType, body }
  }

  const descriptor = (raw: unknown, what: string): Descriptor => {
    const d = decodeDescriptor(raw)
    if (Either.isLeft(d)) throw new ImagePullError("invalid_image", `${ref.display}: a ${what} descriptor is malformed or not sha256`)
    return d.right
  }

  /** The image manifest for `platform`: through an index / manifest list when the reference names one. */
  const manifest = async (platform: Platform): Promise<ImageManifest> => {
    let current = await fetchManifest(ref.digest ?? ref.tag ?? "latest", ref.digest)
    for (let depth = 0; depth < 2; depth++) {
      if (current.mediaType === MEDIA.ociIndex || current.mediaType === MEDIA.dockerList || (current.mediaType === "" && Array.isArray(current.body["manifests"]))) {
        const listed = decodeIndexEntries(current.body["manifests"] ?? [])
        if (Either.isLeft(listed)) throw new ImagePullError("invalid_image", `${ref.display}: the image index is malformed`)
        const entries = listed.right
        const chosen = entries.find((m) => m.platform !== undefined && platformMatches(platform, m.platform))
        if (chosen === undefined) {
          const offered = entries.flatMap((m) => (m.platform?.os !== undefined && m.platform.architecture !== undefined ? [platformString({ os: m.platform.os, architecture: m.platform.architecture, variant: m.platform.variant })] : [])).filter((p) => !p.startsWith("unknown"))
          throw new ImagePullError("wrong_platform", `${ref.display} has no variant for ${platformString(platform)} (it has ${offered.join(", ") || "none"})`)
        }
        const d = descriptor(chosen, "manifest")
        current = await fetchManifest(d.digest, d.digest)
        continue
      }
      break
    }
    if (current.mediaType !== MEDIA.ociManifest && current.mediaType !== MEDIA.dockerManifest && !(current.mediaType === "" && current.body["config"] !== undefined)) {
      throw new ImagePullError("unsupported", `${ref.display}: unsupported manifest type ${current.mediaType.slice(0, 100) || "(none)"}`)
    }
    const layers = current.body["layers"]
    if (!Array.isArray(layers)) throw new ImagePullError("invalid_image", `${ref.display}: the manifest lists no layers`)
    if (layers.length > 200) throw new ImagePullError("unsupported", `${ref.display} has more than 200 layers`)
    return { digest: current.digest, config: descriptor(current.body["config"], "config"), layers: layers.map((l) => descriptor(l, "layer")) }
  }

  /** The image config, its digest verified. */
  const config = async (d: Descriptor): Promise<ImageConfig> => {
    if (d.size > MAX_CONFIG_BYTES) throw new ImagePullError("invalid_image", `${ref.display}: the image config is too large`)
    const response = await request(`blobs/${d.digest}`, undefined, AbortSignal.timeout(MANIFEST_TIMEOUT_MS))
    if (!response.ok) return failed(response, "blob")
    const bytes = await boundedBody(response, MAX_CONFIG_BYTES, "config")
    if (sha256(bytes) !== d.digest) throw new ImagePullError("digest_mismatch", `${ref.display}: the image config does not match its digest`)
    const decoded = decodeConfig(Buffer.from(bytes).toString("utf8"))
    if (Either.isLeft(decoded)) throw new ImagePullError("invalid_image", `${ref.display}: the image config is malformed`, decoded.left)
    return decoded.right
  }

  /**
   * This pull's registry, with this pull's credentials, confirms it serves the blob (a HEAD; a redirect to where it
   * keeps blobs counts, and is not followed): before a layer cached from another pull serves this one. A registry
   * that does not answer HEAD (405, 501): `unsupported`, and the caller downloads the blob instead.
   */
  const confirm = async (d: Descriptor): Promise<"confirmed" | "unsupported"> => {
    const response = await request(`blobs/${d.digest}`, undefined, AbortSignal.timeout(MANIFEST_TIMEOUT_MS), "HEAD", false)
    await response.body?.cancel().catch(() => undefined)
    if (response.ok || (REDIRECT_STATUSES.has(response.status) && response.headers.get("location") !== null)) return "confirmed"
    if (response.status === 405 || response.status === 501) return "unsupported"
    return failed(response, "blob")
  }

  /**
   * Streams a blob into `file` (created 0600, must not exist), hashing as it goes; fails when it is longer than
   * its descriptor says or its digest differs. `onBytes` hears the progress.
   */
  const download = async (d: Descriptor, file: string, onBytes: (n: number) => void): Promise<void> => {
    const aborter = new AbortController()
    let idle = setTimeout(() => aborter.abort(), BLOB_IDLE_MS)
    const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600)
    try {
      const response = await request(`blobs/${d.digest}`, undefined, aborter.signal)
      if (!response.ok) return await failed(response, "blob")
      const hash = createHash("sha256")
      let size = 0
      if (response.body !== null) {
        for await (const chunk of response.body) {
          clearTimeout(idle)
          idle = setTimeout(() => aborter.abort(), BLOB_IDLE_MS)
          size += chunk.length
          if (size > d.size) throw new ImagePullError("digest_mismatch", `${ref.display}: a layer does not match its digest (it is longer than the manifest says)`, d.digest)
          hash.update(chunk)
          fs.writeSync(fd, chunk)
          onBytes(chunk.length)
        }
      }
      if (size !== d.size || `sha256:${hash.digest("hex")}` !== d.digest) {
        throw new ImagePullError("digest_mismatch", `${ref.display}: a layer does not match its digest`, d.digest)
      }
    } catch (e) {
      if (e instanceof ImagePullError) throw e
      throw pullError(e)
    } finally {
      clearTimeout(idle)
      fs.closeSync(fd)
    }
  }

  return { manifest, config, confirm, download }
}
