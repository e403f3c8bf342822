/**
 * A small OCI registry for tests, on 127.0.0.1 (plain HTTP, as the runtime allows on loopback): the distribution
 * API's GET routes (manifests by tag or digest, blobs), Docker Hub's anonymous bearer-token flow (every request
 * first gets a 401 naming the token realm), and counters of what was fetched. Images are built here from
 * busybox-static: an Alpine-like one (static busybox, no glibc) and a distroless-like one (no shell).
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"

export interface TarEntry {
  readonly name: string
  readonly type?: "file" | "dir" | "symlink" | "hardlink" | "chr"
  readonly mode?: number
  readonly data?: Uint8Array | string
  readonly link?: string
}

const field = (header: Buffer, offset: number, length: number, value: string) => header.write(value, offset, length, "utf8")
const octal = (n: number, length: number) => n.toString(8).padStart(length - 1, "0")

/** A ustar archive of `entries` (names up to 100 bytes). */
export const tar = (entries: ReadonlyArray<TarEntry>): Uint8Array<ArrayBuffer> => {
  const blocks: Array<Buffer> = []
  for (const e of entries) {
    const data = e.data === undefined ? Buffer.alloc(0) : Buffer.from(e.data)
    const header = Buffer.alloc(512)
    field(header, 0, 100, e.name)
    const type = e.type ?? "file"
    field(header, 100, 8, octal(e.mode ?? (type === "dir" ? 0o755 : 0o644), 8))
    field(header, 108, 8, octal(0, 8))
    field(header, 116, 8, octal(0, 8))
    field(header, 124, 12, octal(type === "file" ? data.length : 0, 12))
    field(header, 136, 12, octal(0, 12))
    header[156] = { file: 0x30, hardlink: 0x31, symlink: 0x32, chr: 0x33, dir: 0x35 }[type]
    if (e.link !== undefined) field(header, 157, 100, e.link)
    field(header, 257, 6, "ustar\0")
    field(header, 263, 2, "00")
    header.fill(0x20, 148, 156)
    let sum = 0
    for (const b of header) sum += b
    field(header, 148, 8, `${octal(sum, 7)}\0`)
    blocks.push(header)
    if (type === "file") {
      blocks.push(data)
      if (data.length % 512 !== 0) blocks.push(Buffer.alloc(512 - (data.length % 512)))
    }
  }
  blocks.push(Buffer.alloc(1024))
  return new Uint8Array(Buffer.concat(blocks))
}

export const digestOf = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`

export interface ImageSpec {
  readonly layers: ReadonlyArray<ReadonlyArray<TarEntry> | Uint8Array<ArrayBuffer>>
  readonly env?: ReadonlyArray<string>
  readonly workingDir?: string
  readonly entrypoint?: ReadonlyArray<string>
  readonly cmd?: ReadonlyArray<string>
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

export interface TestRegistry {
  /** host:port, e.g. 127.0.0.1:41234 */
  readonly host: string
  /** `digest`: what the tag names (the index, when there is one); `manifest`: the image manifest's digest. */
  readonly push: (repository: string, tag: string, image: ImageSpec) => { readonly digest: string; readonly manifest: string; readonly layers: ReadonlyArray<string> }
  /** GETs of each blob digest so far. */
  readonly blobGets: Map<string, number>
  readonly tokens: { issued: number }
  readonly stop: () => void
}

/** `credentials`: the token realm then wants them (basic auth), as a private repository's would. */
export const startRegistry = (options: { readonly credentials?: { readonly username: string; readonly password: string } } = {}): TestRegistry => {
  const manifests = new Map<string, Stored>()
  const blobs = new Map<string, Buffer>()
  const blobGets = new Map<string, number>()
  const tokens = { issued: 0 }
  const token = `tok-${crypto.randomUUID()}`
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (request) => {
      const url = new URL(request.url)
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
          headers: { "www-authenticate": `Bearer realm="http://${url.host}/token",service="test-registry"` }
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
        return new Response(new Uint8Array(stored.body), { headers: { "content-type": stored.type, "docker-content-digest": digestOf(stored.body) } })
      }
      blobGets.set(ref, (blobGets.get(ref) ?? 0) + 1)
      const blob = blobs.get(ref)
      if (blob === undefined) return Response.json({ errors: [{ code: "BLOB_UNKNOWN" }] }, { status: 404 })
      return new Response(new Uint8Array(blob), { headers: { "content-type": "application/octet-stream" } })
    }
  })

  const putManifest = (repository: string, tag: string, body: Buffer, type: string) => {
    const digest = digestOf(body)
    manifests.set(`${repository}:${tag}`, { body, type })
    manifests.set(`${repository}:${digest}`, { body, type })
    return digest
  }

  const push = (repository: string, tag: string, image: ImageSpec) => {
    const layers = image.layers.map((l) => Buffer.from(Bun.gzipSync(l instanceof Uint8Array ? l : tar(l))))
    const layerDescs = layers.map((bytes, i) => {
      const digest = digestOf(bytes)
      blobs.set(digest, image.corruptLayer === true && i === layers.length - 1 ? Buffer.from(Bun.gzipSync(tar([{ name: "evil", data: "swapped" }]))) : bytes)
      return { mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest, size: bytes.length }
    })
    const config = Buffer.from(JSON.stringify({
      architecture: image.architecture ?? "amd64",
      os: "linux",
      config: { Env: image.env ?? ["PATH=/usr/local/bin:/usr/bin:/bin"], WorkingDir: image.workingDir ?? "", Entrypoint: image.entrypoint ?? null, Cmd: image.cmd ?? null },
      rootfs: { type: "layers", diff_ids: [] }
    }))
    const configDigest = digestOf(config)
    blobs.set(configDigest, config)
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

  return { host: `127.0.0.1:${server.port}`, push, blobGets, tokens, stop: () => void server.stop(true) }
}

const BUSYBOX = "/bin/busybox"
const APPLETS = ["sh", "cat", "ls", "echo", "pwd", "env", "id", "touch", "rm", "mkdir", "sleep", "test", "stat", "wc", "head", "readlink", "ln"]

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
