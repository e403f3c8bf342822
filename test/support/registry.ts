/**
 * A small OCI registry for tests, on 127.0.0.1 (plain HTTP, as the runtime allows on loopback; the runtime reaches
 * it only with REGISTRY_ALLOW_PRIVATE or REGISTRY_PRIVATE_HOSTS): the distribution API's GET and HEAD routes
 * (manifests by tag or digest, blobs — each blob served only in the repositories it was pushed to, as a real
 * registry links them), Docker Hub's anonymous bearer-token flow (every request first gets a 401 naming the token
 * realm), and counters of what was fetched. Hostile behaviours a test can switch on: manifests naming blobs the
 * registry does not have (`borrow`), HEAD claiming every blob, another token realm, blob redirects (to any URL, or
 * a chain of them through `/redirect/<n>/<digest>`). Images are built here from busybox-static: an Alpine-like
 * one (static busybox, no glibc) and a distroless-like one (no shell).
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"

export interface TarEntry {
  readonly name: string
  /** `pax`: a PAX extended header (its data the records) describing the next entry. */
  readonly type?: "file" | "dir" | "symlink" | "hardlink" | "chr" | "pax"
  readonly mode?: number
  readonly data?: Uint8Array | string
  readonly link?: string
}

const field = (header: Buffer, offset: number, length: number, value: string) => header.write(value, offset, length, "utf8")
const octal = (n: number, length: number) => n.toString(8).padStart(length - 1, "0")

/** Writes a ustar header into `h` (512 zero bytes). */
const header = (name: string, type: number, size: number, mode: number, link: string | undefined, h = Buffer.alloc(512)): Buffer => {
  field(h, 0, 100, name)
  field(h, 100, 8, octal(mode, 8))
  field(h, 108, 8, octal(0, 8))
  field(h, 116, 8, octal(0, 8))
  field(h, 124, 12, octal(size, 12))
  field(h, 136, 12, octal(0, 12))
  h[156] = type
  if (link !== undefined) field(h, 157, 100, link)
  field(h, 257, 6, "ustar\0")
  field(h, 263, 2, "00")
  h.fill(0x20, 148, 156)
  let sum = 0
  for (let i = 0; i < 512; i++) sum += h[i]!
  field(h, 148, 8, `${octal(sum, 7)}\0`)
  return h
}

const padded = (data: Buffer): Array<Buffer> => (data.length % 512 === 0 ? [data] : [data, Buffer.alloc(512 - (data.length % 512))])

/** A ustar archive of `entries`; a name or link longer than 100 bytes goes in a GNU long-name entry before it. */
export const tar = (entries: Iterable<TarEntry>): Uint8Array<ArrayBuffer> => {
  const blocks: Array<Buffer> = []
  for (const e of entries) {
    const data = e.data === undefined ? Buffer.alloc(0) : Buffer.from(e.data)
    const type = e.type ?? "file"
    for (const [value, kind] of [[e.name, 0x4c], [e.link, 0x4b]] as const) {
      if (value === undefined || Buffer.byteLength(value) <= 100) continue
      const long = Buffer.from(`${value}\0`)
      blocks.push(header("././@LongLink", kind, long.length, 0o644, undefined), ...padded(long))
    }
    const withData = type === "file" || type === "pax"
    blocks.push(header(e.name, { file: 0x30, hardlink: 0x31, symlink: 0x32, chr: 0x33, dir: 0x35, pax: 0x78 }[type], withData ? data.length : 0, e.mode ?? (type === "dir" ? 0o755 : 0o644), e.link))
    if (withData) blocks.push(...padded(data))
  }
  blocks.push(Buffer.alloc(1024))
  return new Uint8Array(Buffer.concat(blocks))
}

/** A tar of `n` empty files named `<prefix><i>`, written into one buffer (fast for the hundreds of thousands a test may want). */
export const emptyFilesTar = (n: number, prefix = "f"): Uint8Array<ArrayBuffer> => {
  const out = Buffer.alloc(512 * (n + 2))
  for (let i = 0; i < n; i++) header(`${prefix}${i}`, 0x30, 0, 0o644, undefined, out.subarray(512 * i, 512 * (i + 1)))
  return new Uint8Array(out.buffer, out.byteOffset, out.length)
}

export const digestOf = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`

/** A layer named only by its digest: the manifest lists it, the registry neither has nor serves it. */
export interface BorrowedLayer {
  readonly borrow: string
  readonly size: number
}

export interface ImageSpec {
  readonly layers: ReadonlyArray<ReadonlyArray<TarEntry> | Uint8Array<ArrayBuffer> | BorrowedLayer>
  readonly env?: ReadonlyArray<string>
  readonly workingDir?: string
  readonly entrypoint?: ReadonlyArray<string>
  readonly cmd?: ReadonlyArray<string>
  /** The config's User (`uid`, `name`, `uid:gid`, `name:group` …); default none (root). */
  readonly user?: string
  readonly architecture?: string
  /** Serve the image through an OCI index (with an arm64 sibling that does not exist) instead of a bare manifest. */
  readonly index?: boolean
  /** Serve a layer whose bytes do not match the digest the manifest names. */
  readonly corruptLayer?: boolean
}

interface Stored {
  readonly body: Buffer
  readonly type: string
}

/** Hostile behaviours, switched on and off by a test. */
export interface RegistryBehaviour {
  /** The token realm announced in every 401 (default this registry's own `/token`). */
  realm?: string | undefined
  /** Answer a blob request (GET or HEAD, once authorized) with a 307 to this URL. */
  blobRedirect?: ((digest: string) => string | undefined) | undefined
  /** HEAD of any blob answers 200, whether the registry has it or not. */
  claimEveryBlob?: boolean | undefined
}

export interface TestRegistry {
  /** host:port, e.g. 127.0.0.1:41234 */
  readonly host: string
  /** `digest`: what the tag names (the index, when there is one); `manifest`: the image manifest's digest. */
  readonly push: (repository: string, tag: string, image: ImageSpec) => { readonly digest: string; readonly manifest: string; readonly layers: ReadonlyArray<string> }
  /** A manifest of any bytes (malformed ones included) under `tag`, served as `type`. */
  readonly putManifest: (repository: string, tag: string, body: Buffer, type: string) => string
  /** A blob of any bytes in `repository`: its descriptor. */
  readonly putBlob: (repository: string, bytes: Buffer) => { readonly digest: string; readonly size: number }
  /** GETs and HEADs of each blob digest so far. */
  readonly blobGets: Map<string, number>
  readonly blobHeads: Map<string, number>
  readonly tokens: { issued: number }
  /** The bearer token the registry accepts (for a token server of the test's own). */
  readonly token: string
  /** A blob's bytes, pushed to any repository. */
  readonly blob: (digest: string) => Uint8Array<ArrayBuffer> | undefined
  readonly behaviour: RegistryBehaviour
  readonly stop: () => void
}

const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1)

/** `credentials`: the token realm then wants them (basic auth), as a private repository's would. */
export const startRegistry = (options: { readonly credentials?: { readonly username: string; readonly password: string } } = {}): TestRegistry => {
  const manifests = new Map<string, Stored>()
  const blobs = new Map<string, Buffer>()
  /** `repository@digest` of every blob pushed to that repository. */
  const links = new Set<string>()
  const blobGets = new Map<string, number>()
  const blobHeads = new Map<string, number>()
  const tokens = { issued: 0 }
  const token = `tok-${crypto.randomUUID()}`
  const behaviour: RegistryBehaviour = {}
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (request) => {
      const url = new URL(request.url)
      const head = request.method === "HEAD"
      // Where a redirect chain ends: the blob, without authorization (as a pre-signed URL serves it).
      const hop = /^\/redirect\/(\d+)\/(sha256:[a-f0-9]{64})$/.exec(url.pathname)
      if (hop !== null) {
        const left = Number(hop[1])
        if (left > 0) return new Response(null, { status: 307, headers: { location: `/redirect/${left - 1}/${hop[2]}` } })
        const blob = blobs.get(hop[2]!)
        return blob === undefined ? new Response("no such blob", { status: 404 }) : new Response(head ? null : new Uint8Array(blob))
      }
      if (url.pathname === "/token") {
        const { credentials } = options
        if (credentials !== undefined && request.headers.get("authorization") !== `Basic ${btoa(`${credentials.username}:${credentials.password}`)}`) {
          return Response.json({ errors: [{ code: "UNAUTHORIZED" }] }, { status: 401 })
        }
        tokens.issued++
        return Response.json({ token, expires_in: 300 })
      }
      if (request.headers.get("authorization") !== `Bearer ${token}`) {
        return new Response(JSON.stringify({ errors: [{ code: "UNAUTHORIZED" }] }), {
          status: 401,
          headers: { "www-authenticate": `Bearer realm="${behaviour.realm ?? `http://${url.host}/token`}",service="test-registry"` }
        })
      }
      if (url.pathname === "/v2/") return Response.json({})
      const m = /^\/v2\/(.+)\/(manifests|blobs)\/([^/]+)$/.exec(url.pathname)
      if (m === null) return new Response("not found", { status: 404 })
      const [, name, kind, ref] = m as unknown as [string, string, string, string]
      if (kind === "manifests") {
        const stored = manifests.get(`${name}:${ref}`)
        if (stored === undefined) {
          const known = [...manifests.keys()].some((k) => k.startsWith(`${name}:`))
          return Response.json({ errors: [{ code: known ? "MANIFEST_UNKNOWN" : "NAME_UNKNOWN" }] }, { status: 404 })
        }
        return new Response(head ? null : new Uint8Array(stored.body), { headers: { "content-type": stored.type, "docker-content-digest": digestOf(stored.body) } })
      }
      count(head ? blobHeads : blobGets, ref)
      const redirect = behaviour.blobRedirect?.(ref)
      if (redirect !== undefined) return new Response(null, { status: 307, headers: { location: redirect } })
      if (head && behaviour.claimEveryBlob === true) return new Response(null, { headers: { "content-length": "1" } })
      const blob = links.has(`${name}@${ref}`) ? blobs.get(ref) : undefined
      if (blob === undefined) return head ? new Response(null, { status: 404 }) : Response.json({ errors: [{ code: "BLOB_UNKNOWN" }] }, { status: 404 })
      return new Response(head ? null : new Uint8Array(blob), { headers: { "content-type": "application/octet-stream", "content-length": String(blob.length) } })
    }
  })

  const putManifest = (repository: string, tag: string, body: Buffer, type: string) => {
    const digest = digestOf(body)
    manifests.set(`${repository}:${tag}`, { body, type })
    manifests.set(`${repository}:${digest}`, { body, type })
    return digest
  }

  const push = (repository: string, tag: string, image: ImageSpec) => {
    const layerDescs = image.layers.map((l, i) => {
      const mediaType = "application/vnd.oci.image.layer.v1.tar+gzip"
      if ("borrow" in l) return { mediaType, digest: l.borrow, size: l.size }
      const bytes = Buffer.from(Bun.gzipSync(l instanceof Uint8Array ? l : tar(l)))
      const digest = digestOf(bytes)
      blobs.set(digest, image.corruptLayer === true && i === image.layers.length - 1 ? Buffer.from(Bun.gzipSync(tar([{ name: "evil", data: "swapped" }]))) : bytes)
      links.add(`${repository}@${digest}`)
      return { mediaType, digest, size: bytes.length }
    })
    const config = Buffer.from(JSON.stringify({
      architecture: image.architecture ?? "amd64",
      os: "linux",
      config: { Env: image.env ?? ["PATH=/usr/local/bin:/usr/bin:/bin"], WorkingDir: image.workingDir ?? "", Entrypoint: image.entrypoint ?? null, Cmd: image.cmd ?? null, User: image.user ?? "" },
      rootfs: { type: "layers", diff_ids: [] }
    }))
    const configDigest = digestOf(config)
    blobs.set(configDigest, config)
    links.add(`${repository}@${configDigest}`)
    const manifest = Buffer.from(JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: configDigest, size: config.length },
      layers: layerDescs
    }))
    if (image.index !== true) {
      const digest = putManifest(repository, tag, manifest, "application/vnd.oci.image.manifest.v1+json")
      return { digest, manifest: digest, layers: layerDescs.map((l) => l.digest) }
    }
    const manifestDigest = putManifest(repository, `m-${tag}`, manifest, "application/vnd.oci.image.manifest.v1+json")
    const index = Buffer.from(JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: [
        { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: `sha256:${"0".repeat(64)}`, size: 100, platform: { os: "linux", architecture: "riscv64" } },
        { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: manifestDigest, size: manifest.length, platform: { os: "linux", architecture: image.architecture ?? "amd64" } }
      ]
    }))
    return { digest: putManifest(repository, tag, index, "application/vnd.oci.image.index.v1+json"), manifest: manifestDigest, layers: layerDescs.map((l) => l.digest) }
  }

  const putBlob = (repository: string, bytes: Buffer) => {
    const digest = digestOf(bytes)
    blobs.set(digest, bytes)
    links.add(`${repository}@${digest}`)
    return { digest, size: bytes.length }
  }

  const blob = (digest: string) => {
    const bytes = blobs.get(digest)
    return bytes === undefined ? undefined : new Uint8Array(bytes)
  }
  return { host: `127.0.0.1:${server.port}`, push, putManifest, putBlob, blobGets, blobHeads, tokens, token, blob, behaviour, stop: () => void server.stop(true) }
}

const BUSYBOX = "/bin/busybox"
const APPLETS = ["sh", "cat", "ls", "echo", "pwd", "env", "id", "touch", "rm", "mkdir", "sleep", "test", "stat", "wc", "head", "readlink", "ln", "grep", "wget"]

/** The static busybox (Debian's busybox-static); scripts/ensure-deps.sh installs it. */
export const busybox = (): Buffer => {
  const bytes = fs.readFileSync(BUSYBOX)
  // A static binary has no PT_INTERP (type 3) among its ELF64 program headers.
  const phoff = Number(bytes.readBigUInt64LE(0x20))
  const phentsize = bytes.readUInt16LE(0x36)
  const phnum = bytes.readUInt16LE(0x38)
  for (let i = 0; i < phnum; i++) if (bytes.readUInt32LE(phoff + i * phentsize) === 3) throw new Error(`${BUSYBOX} is not static: install busybox-static`)
  return bytes
}

export const osRelease = (name: string) => `NAME="${name}"\nID=${name.toLowerCase()}\nVERSION_ID=1.0\n`

/** An Alpine-like image: static busybox with its applets in /bin, an os-release, no glibc anywhere. */
export const alpineLike = (name = "TestAlpine"): ReadonlyArray<TarEntry> => [
  { name: "bin/", type: "dir" },
  { name: "bin/busybox", data: busybox(), mode: 0o755 },
  ...APPLETS.map((a): TarEntry => ({ name: `bin/${a}`, type: "symlink", link: "busybox" })),
  { name: "etc/", type: "dir" },
  { name: "etc/os-release", data: osRelease(name) },
  { name: "usr/", type: "dir" },
  { name: "usr/share/", type: "dir" },
  { name: "usr/share/image-marker", data: "from the image\n" }
]

/** A distroless-like image: one static program (busybox, not linked as anything), no shell, no /bin. */
export const distrolessLike = (): ReadonlyArray<TarEntry> => [
  { name: "app/", type: "dir" },
  { name: "app/busybox", data: busybox(), mode: 0o755 },
  { name: "etc/", type: "dir" },
  { name: "etc/os-release", data: osRelease("TestDistroless") }
]
