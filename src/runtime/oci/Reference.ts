/**
 * Image references as Docker reads them: `alpine` is `docker.io/library/alpine:latest`, a first component with a
 * dot, a colon or `localhost` names a registry, `@sha256:<hex>` pins a digest. And the platform this host runs.
 */
import * as os from "node:os"
import { ImagePullError } from "./Errors.ts"

export interface ImageReference {
  /** The registry as written (docker.io for Docker Hub), lowercase. */
  readonly registry: string
  readonly repository: string
  readonly tag: string | undefined
  readonly digest: string | undefined
  /** The full reference, for messages: `docker.io/library/alpine:3.20`. */
  readonly display: string
}

const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/
const TAG = /^[\w][\w.-]{0,127}$/
const DIGEST = /^sha256:[a-f0-9]{64}$/

export const parseReference = (raw: string): ImageReference => {
  const bad = (why: string) => new ImagePullError("invalid_reference", `${JSON.stringify(raw.slice(0, 200))} is not an image reference: ${why}`)
  if (typeof raw !== "string" || raw.length === 0 || raw.length > 512 || /\s/.test(raw)) throw bad("empty, too long or with spaces")
  let rest = raw
  let digest: string | undefined
  const at = rest.indexOf("@")
  if (at >= 0) {
    digest = rest.slice(at + 1)
    rest = rest.slice(0, at)
    if (!DIGEST.test(digest)) throw bad("only sha256 digests are supported")
  }
  let tag: string | undefined
  const lastSlash = rest.lastIndexOf("/")
  const colon = rest.lastIndexOf(":")
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1)
    rest = rest.slice(0, colon)
    if (!TAG.test(tag)) throw bad("bad tag")
  }
  const parts = rest.split("/")
  let registry = "docker.io"
  const first = parts[0] ?? ""
  if (parts.length > 1 && (first.includes(".") || first.includes(":") || first === "localhost" || first.startsWith("["))) {
    registry = first.toLowerCase()
    parts.shift()
  }
  if (!/^(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/.test(registry)) throw bad("bad registry host")
  if (registry === "index.docker.io" || registry === "registry-1.docker.io") registry = "docker.io"
  if (registry === "docker.io" && parts.length === 1) parts.unshift("library")
  if (parts.length === 0 || !parts.every((p) => COMPONENT.test(p))) throw bad("bad repository name")
  const repository = parts.join("/")
  if (tag === undefined && digest === undefined) tag = "latest"
  const display = `${registry}/${repository}${tag !== undefined ? `:${tag}` : ""}${digest !== undefined ? `@${digest}` : ""}`
  return { registry, repository, tag, digest, display }
}

/** The registry's host without port, for the loopback check. */
const hostOf = (registry: string) => {
  if (registry.startsWith("[")) return registry.slice(1, registry.indexOf("]"))
  const colon = registry.lastIndexOf(":")
  return colon >= 0 ? registry.slice(0, colon) : registry
}

/** Registries on loopback may be plain HTTP, as Docker allows for localhost; every other one is HTTPS only. */
export const isLoopback = (registry: string) => {
  const host = hostOf(registry)
  return host === "localhost" || host === "::1" || /^127(?:\.\d{1,3}){3}$/.test(host)
}

export const registryBaseUrl = (registry: string) =>
  registry === "docker.io" ? "https://registry-1.docker.io" : `${isLoopback(registry) ? "http" : "https"}://${registry}`

export interface Platform {
  readonly os: string
  readonly architecture: string
  readonly variant?: string | undefined
}

const ARCH: Record<string, string> = { x64: "amd64", arm64: "arm64", arm: "arm", ia32: "386", ppc64: "ppc64le", s390x: "s390x", riscv64: "riscv64" }

/** The platform of this host in OCI terms (linux/amd64, linux/arm64/v8 ...). */
export const hostPlatform = (): Platform => {
  const architecture = ARCH[os.arch()] ?? os.arch()
  return { os: "linux", architecture, ...(architecture === "arm64" ? { variant: "v8" } : {}) }
}

export const platformString = (p: Platform) => `${p.os}/${p.architecture}${p.variant !== undefined ? `/${p.variant}` : ""}`

/** "linux/amd64", "linux/arm64/v8" → a Platform; undefined when malformed. */
export const parsePlatform = (raw: string): Platform | undefined => {
  const [o, architecture, variant, extra] = raw.split("/")
  if (o === undefined || architecture === undefined || extra !== undefined || !/^[a-z0-9]+$/.test(o) || !/^[a-z0-9]+$/.test(architecture)) return undefined
  if (variant !== undefined && !/^[a-z0-9]+$/.test(variant)) return undefined
  return { os: o, architecture, ...(variant !== undefined ? { variant } : {}) }
}

/** Whether `candidate` (from an index or a config) runs as `wanted`: same os and arch; a variant only when both name one. */
export const platformMatches = (wanted: Platform, candidate: { readonly os?: string | undefined; readonly architecture?: string | undefined; readonly variant?: string | undefined }) =>
  candidate.os === wanted.os &&
  candidate.architecture === wanted.architecture &&
  (wanted.variant === undefined || candidate.variant === undefined || candidate.variant === wanted.variant)
