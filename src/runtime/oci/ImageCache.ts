/**
 * The image layer cache, shared by every sandbox of a DATA_DIR (root only, like the rest of it):
 *   images/layers/<hex>/       a layer unpacked (Unpack.ts), named by the sha256 of its blob: content-addressed,
 *                              read-only to sandboxes (an idmapped overlayfs lower layer, Jail.ts)
 *   images/layers/<hex>.json   its sizes (bytes, entries) and the registries that served its blob; its mtime is its
 *                              last use (the LRU clock)
 *   images/tmp/                downloads and unpacks in progress (renamed into place when complete; a refused one
 *                              is removed whole)
 *
 * A layer is shared only with proof of access. Its digest is no secret (any manifest can name it), so a pull may
 * use a cached layer only when (1) its own registry once served that blob's bytes, verified against the digest
 * (the layer's `sources`; a registry the cache has not seen hand over the bytes is made to, even when the layer
 * is cached from another: a registry the pull's author runs could otherwise claim any blob), and (2) that
 * registry, asked with this pull's credentials for this pull's repository, confirms the blob now (a HEAD), since
 * one registry serves many repositories, not all to everyone. Manifests and configs are never cached: each pull
 * fetches them from its own registry.
 *
 * Limits: each image is bounded in bytes and in entries (files, directories, links: inodes), each layer in
 * entries, paths in depth and length (Unpack.ts); the whole cache in bytes and in entries (IMAGE_CACHE_MB,
 * IMAGE_CACHE_MAX_FILES). Every entry is charged before it is made, against its image and against the cache (what
 * is cached plus what is being unpacked): when the cache would pass its limits, the least recently used layers no
 * sandbox uses are removed, and when that is not enough the pull fails. Accounting rather than a file system of
 * the cache's own with a quota: that would be a mount in the host's mount table, made and kept by the gateway
 * across restarts, and every jail's overlay binds the layers from it; counting is exact here, because the gateway
 * itself creates every entry. The host is guarded too: no layer is unpacked while its file system has less than
 * 5% of its space or inodes free (other users of that file system are not counted by the cache).
 */
import { Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { AddressPolicy } from "../../net/Targets.ts"
import { decodeJson, LayerInfo, LayerUsage } from "./Documents.ts"
import { ImagePullError } from "./Errors.ts"
import { type ImageReference, parseReference, platformMatches, platformString, type Platform } from "./Reference.ts"
import { type Descriptor, makeRegistryClient } from "./Registry.ts"
import { type ImageUser, resolveImageUser } from "./ImageUser.ts"
import { unpackLayer, type Unpacked } from "./Unpack.ts"

export interface PulledImage {
  /** The reference as asked, normalized (docker.io/library/alpine:3.20). */
  readonly reference: string
  /** The manifest's digest. */
  readonly digest: string
  readonly platform: string
  /** Layer digests, bottom first. */
  readonly layers: ReadonlyArray<string>
  /** The image config's Env, WorkingDir, Entrypoint and Cmd. */
  readonly env: Readonly<Record<string, string>>
  readonly workingDir: string | undefined
  readonly entrypoint: ReadonlyArray<string>
  readonly cmd: ReadonlyArray<string>
  /** Its User, resolved in the image's own /etc/passwd and /etc/group (ImageUser.ts). */
  readonly user: ImageUser
}

export type PullProgress =
  | { readonly phase: "resolved"; readonly digest: string; readonly layers: number; readonly bytes: number }
  | { readonly phase: "layer"; readonly digest: string; readonly cached: boolean; readonly bytes: number }

export interface ImageLimits {
  /** Largest image, compressed and unpacked (IMAGE_MAX_MB). */
  readonly maxImageBytes: number
  /** Entries (files, directories, links, whiteouts) an image's layers make, all together (IMAGE_MAX_FILES). */
  readonly maxImageFiles: number
  /** Entries one layer makes (IMAGE_LAYER_MAX_FILES). */
  readonly maxLayerFiles: number
  /** Components of a path in a layer (IMAGE_MAX_PATH_DEPTH). */
  readonly maxPathDepth: number
  /** Bytes of a path in a layer, or of a symlink's target (IMAGE_MAX_PATH_BYTES). */
  readonly maxPathBytes: number
  /** The cache is held to these (IMAGE_CACHE_MB, IMAGE_CACHE_MAX_FILES). */
  readonly maxCacheBytes: number
  readonly maxCacheFiles: number
}

/** The defaults: generous for real images (a large Python or Node image makes some 50,000 entries). */
export const DEFAULT_IMAGE_LIMITS: ImageLimits = {
  maxImageBytes: 4096 * 1024 * 1024,
  maxImageFiles: 250_000,
  maxLayerFiles: 100_000,
  maxPathDepth: 128,
  maxPathBytes: 2048,
  maxCacheBytes: 20_480 * 1024 * 1024,
  maxCacheFiles: 1_000_000
}

export interface ImageCacheOptions {
  readonly dataDir: string
  /** A Docker-style auth file (REGISTRY_AUTH_FILE). */
  readonly authFile?: string | undefined
  /** The address policy of every registry request. */
  readonly policy: AddressPolicy
  readonly limits: ImageLimits
  /** Layer digests running sandboxes use: never swept. */
  readonly inUse: () => ReadonlySet<string>
}

const hexOf = (digest: string) => digest.slice("sha256:".length)
const PARALLEL_LAYERS = 3
/** Making room sweeps below the cap by this much, so the next entries do not sweep again at once. */
const LOW_WATER = 0.9
/** The host's file system keeps at least this share of its space and inodes free of layers. */
const HOST_RESERVE = 0.05
/** The host's free space is looked at again after this many entries or bytes of unpacking. */
const HOST_CHECK_FILES = 4096
const HOST_CHECK_BYTES = 256 * 1024 * 1024

export const imagesDir = (dataDir: string) => path.join(dataDir, "images")
export const layerDir = (dataDir: string, digest: string) => path.join(imagesDir(dataDir), "layers", hexOf(digest))

/** A cached layer as its `.json` says. */
const decodeInfo = decodeJson(LayerInfo)
const decodeUsage = decodeJson(LayerUsage)

interface Usage {
  bytes: number
  files: number
}

const mib = (bytes: number) => Math.floor(bytes / 1048576)

export const makeImageCache = (options: ImageCacheOptions) => {
  const { limits } = options
  const root = imagesDir(options.dataDir)
  const layersDir = path.join(root, "layers")
  const tmpDir = path.join(root, "tmp")
  for (const dir of [root, layersDir, tmpDir]) fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  fs.chmodSync(root, 0o700)
  // Leftovers of a crashed pull.
  for (const name of fs.readdirSync(tmpDir)) fs.rmSync(path.join(tmpDir, name), { recursive: true, force: true })

  /** Downloads in progress, by registry and digest: a pull joins only one from its own registry. */
  const inflight = new Map<string, Promise<Unpacked>>()
  /** Digests of pulls in progress, so many of them as ask: never swept meanwhile. */
  const pulling = new Map<string, number>()

  const meta = (digest: string) => path.join(layersDir, `${hexOf(digest)}.json`)
  /** The layer's info when it is cached (its directory and a current `.json`); undefined otherwise. */
  const cachedInfo = (digest: string): LayerInfo | undefined => {
    try {
      if (!fs.statSync(layerDir(options.dataDir, digest)).isDirectory()) return undefined
      return readInfo(meta(digest))
    } catch {
      return undefined
    }
  }
  /** A `.json` of this version (one without entries or sources predates them: its layer is pulled again, once). */
  const readInfo = (file: string): LayerInfo | undefined => {
    try {
      return Either.getOrUndefined(decodeInfo(fs.readFileSync(file, "utf8")))
    } catch {
      return undefined
    }
  }
  /** Writes the layer's info with `source` among its sources (merged with what is there; atomic). */
  const recordSource = (digest: string, unpacked: Unpacked, compressed: number, source: string) => {
    const existing = readInfo(meta(digest))
    const info: LayerInfo = { bytes: unpacked.bytes, files: unpacked.files, compressed, sources: [...new Set([...(existing?.sources ?? []), source])] }
    const temp = path.join(tmpDir, `${hexOf(digest)}.${process.pid}.${crypto.randomUUID()}.json`)
    fs.writeFileSync(temp, JSON.stringify(info), { mode: 0o600 })
    fs.renameSync(temp, meta(digest))
  }
  const touch = (digest: string) => {
    const now = new Date()
    try {
      fs.utimesSync(meta(digest), now, now)
    } catch {}
  }

  // Accounting ---------------------------------------------------------------------------------------------------

  /** Every cached layer's size and last use (old `.json` files count their bytes; their entries were not kept). */
  const scan = () =>
    fs.readdirSync(layersDir).filter((n) => n.endsWith(".json")).flatMap((n) => {
      try {
        const file = path.join(layersDir, n)
        const m = Either.getOrThrow(decodeUsage(fs.readFileSync(file, "utf8")))
        return [{ digest: `sha256:${n.slice(0, -5)}`, bytes: m.bytes ?? m.unpacked ?? 0, files: m.files ?? 0, used: fs.statSync(file).mtimeMs }]
      } catch {
        return []
      }
    })
  /** What the cache holds, and what unpacks in progress have made so far. */
  const cached: Usage = { bytes: 0, files: 0 }
  const reserved: Usage = { bytes: 0, files: 0 }
  for (const e of scan()) {
    cached.bytes += e.bytes
    cached.files += e.files
  }
  const over = (factor: number) =>
    cached.bytes + reserved.bytes > limits.maxCacheBytes * factor || cached.files + reserved.files > limits.maxCacheFiles * factor

  /**
   * Removes the least recently used layers no sandbox uses (nor a pull in progress) while the cache (with what is
   * being unpacked) is above `factor` of its limits.
   */
  const sweep = (factor = 1): Array<string> => {
    const used = new Set([...options.inUse(), ...pulling.keys()])
    const removed: Array<string> = []
    for (const e of scan().sort((a, b) => a.used - b.used)) {
      if (!over(factor)) break
      if (used.has(e.digest)) continue
      fs.rmSync(layerDir(options.dataDir, e.digest), { recursive: true, force: true })
      fs.rmSync(meta(e.digest), { force: true })
      cached.bytes -= e.bytes
      cached.files -= e.files
      removed.push(e.digest)
    }
    return removed
  }

  /** Refuses to unpack more while the host's file system is nearly full (in space or in inodes). */
  const checkHost = () => {
    const s = fs.statfsSync(tmpDir)
    if (s.bavail < s.blocks * HOST_RESERVE || (s.files > 0 && s.ffree < s.files * HOST_RESERVE)) {
      throw new ImagePullError("cache_full", "the host's disk is too full to unpack the image", `${s.bavail}/${s.blocks} blocks, ${s.ffree}/${s.files} inodes free`)
    }
  }

  /**
   * A budget for one layer's unpack: each entry is charged to the pull's image (`image`, shared by its layers) and
   * to the cache before it is made. `release` gives back what the layer reserved (it was committed, or refused).
   */
  const budget = (image: Usage) => {
    const mine: Usage = { bytes: 0, files: 0 }
    let sinceCheck = { bytes: 0, files: 0 }
    checkHost()
    const charge = (bytes: number, files: number) => {
      image.bytes += bytes
      image.files += files
      if (image.bytes > limits.maxImageBytes) throw new ImagePullError("too_large", `the image unpacks to more than the ${mib(limits.maxImageBytes)} MiB allowed`)
      if (image.files > limits.maxImageFiles) throw new ImagePullError("too_large", `the image has more than ${limits.maxImageFiles} files and directories (IMAGE_MAX_FILES)`)
      mine.bytes += bytes
      mine.files += files
      reserved.bytes += bytes
      reserved.files += files
      if (over(1)) {
        sweep(LOW_WATER)
        if (over(1)) {
          throw new ImagePullError(
            "cache_full",
            `the image cache is full (IMAGE_CACHE_MB ${mib(limits.maxCacheBytes)} MiB, IMAGE_CACHE_MAX_FILES ${limits.maxCacheFiles}) with the images of existing sandboxes and of pulls under way`
          )
        }
      }
      sinceCheck = { bytes: sinceCheck.bytes + bytes, files: sinceCheck.files + files }
      if (sinceCheck.files >= HOST_CHECK_FILES || sinceCheck.bytes >= HOST_CHECK_BYTES) {
        sinceCheck = { bytes: 0, files: 0 }
        checkHost()
      }
    }
    const release = () => {
      reserved.bytes -= mine.bytes
      reserved.files -= mine.files
    }
    return { charge, release }
  }

  // Layers -------------------------------------------------------------------------------------------------------

  type Client = ReturnType<typeof makeRegistryClient>

  /**
   * The layer unpacked in the cache for a pull from `registry`; what it unpacked to. Served from the cache only
   * when that registry served this blob before and confirms it now; otherwise downloaded from that registry
   * (joining a download of the same blob from the same registry in progress) and unpacked, unless it is cached
   * already, from another registry: then only the download's proof is kept.
   */
  const ensureLayer = async (client: Client, registry: string, d: Descriptor, image: Usage, onProgress: (p: PullProgress) => void): Promise<Unpacked> => {
    const known = cachedInfo(d.digest)
    const key = `${registry}\n${d.digest}`
    const running = inflight.get(key)
    if (known?.sources.includes(registry) === true || running !== undefined) {
      // A registry that does not answer HEAD proves it serves the blob the long way: by sending it.
      if ((await client.confirm(d)) === "unsupported") return download(client, registry, d, image, onProgress)
      if (known === undefined || !known.sources.includes(registry)) return running!
      touch(d.digest)
      onProgress({ phase: "layer", digest: d.digest, cached: true, bytes: d.size })
      return known
    }
    const work = download(client, registry, d, image, onProgress).finally(() => inflight.delete(key))
    inflight.set(key, work)
    return work
  }

  const download = async (client: Client, registry: string, d: Descriptor, image: Usage, onProgress: (p: PullProgress) => void): Promise<Unpacked> => {
    const tag = `${hexOf(d.digest)}.${process.pid}.${crypto.randomUUID()}`
    const blob = path.join(tmpDir, `${tag}.blob`)
    const unpacked = path.join(tmpDir, `${tag}.dir`)
    const { charge, release } = budget(image)
    try {
      await client.download(d, blob, () => undefined)
      const already = cachedInfo(d.digest)
      if (already !== undefined) {
        // The same bytes are cached from another registry: this one has now proved it serves them too.
        recordSource(d.digest, already, d.size, registry)
        touch(d.digest)
        onProgress({ phase: "layer", digest: d.digest, cached: true, bytes: d.size })
        return already
      }
      fs.mkdirSync(unpacked, { mode: 0o755 })
      const size = await unpackLayer(blob, unpacked, { maxBytes: limits.maxImageBytes, maxFiles: limits.maxLayerFiles, maxDepth: limits.maxPathDepth, maxPathBytes: limits.maxPathBytes, charge })
      fs.chmodSync(unpacked, 0o755)
      recordSource(d.digest, size, d.size, registry)
      try {
        fs.renameSync(unpacked, layerDir(options.dataDir, d.digest))
        cached.bytes += size.bytes
        cached.files += size.files
      } catch (e) {
        // Another pull (or gateway on this DATA_DIR) put the same content there first; ours is removed below.
        if (!fs.existsSync(layerDir(options.dataDir, d.digest))) throw e
      }
      onProgress({ phase: "layer", digest: d.digest, cached: false, bytes: d.size })
      return size
    } finally {
      release()
      fs.rmSync(blob, { force: true })
      fs.rmSync(unpacked, { recursive: true, force: true })
    }
  }

  /** Every failure names the image. */
  const pull = async (reference: string, platform: Platform, onProgress: (p: PullProgress) => void = () => undefined): Promise<PulledImage> => {
    const ref = parseReference(reference)
    try {
      return await pullParsed(ref, platform, onProgress)
    } catch (e) {
      if (e instanceof ImagePullError && !e.message.includes(ref.display)) throw new ImagePullError(e.reason, `${ref.display}: ${e.message}`, e.detail)
      throw e
    }
  }

  const pullParsed = async (ref: ImageReference, platform: Platform, onProgress: (p: PullProgress) => void): Promise<PulledImage> => {
    const client = makeRegistryClient(ref, { authFile: options.authFile, policy: options.policy })
    const manifest = await client.manifest(platform)
    const compressed = manifest.layers.reduce((s, l) => s + l.size, 0)
    if (compressed > limits.maxImageBytes) {
      throw new ImagePullError("too_large", `${ref.display} is ${Math.ceil(compressed / 1048576)} MiB, more than the ${mib(limits.maxImageBytes)} MiB allowed`)
    }
    onProgress({ phase: "resolved", digest: manifest.digest, layers: manifest.layers.length, bytes: compressed })
    const config = await client.config(manifest.config)
    if ((config.os !== undefined || config.architecture !== undefined) && !platformMatches(platform, { os: config.os, architecture: config.architecture, variant: config.variant })) {
      throw new ImagePullError("wrong_platform", `${ref.display} is built for ${config.os ?? "?"}/${config.architecture ?? "?"}, this host runs ${platformString(platform)}`)
    }
    const digests = manifest.layers.map((l) => l.digest)
    for (const d of digests) pulling.set(d, (pulling.get(d) ?? 0) + 1)
    let user: ImageUser
    try {
      // What this pull unpacks itself, charged as it goes; below, the whole image, cached layers included.
      const image: Usage = { bytes: 0, files: 0 }
      const total: Usage = { bytes: 0, files: 0 }
      const queue = [...manifest.layers]
      // A failed layer stops the others from starting; the pull fails once those under way are done (shared with
      // other pulls, they are not cut short), so a failed pull leaves nothing in progress behind it.
      const workers = await Promise.allSettled(Array.from({ length: Math.min(PARALLEL_LAYERS, queue.length) }, async () => {
        for (let d = queue.shift(); d !== undefined; d = queue.shift()) {
          try {
            const size = await ensureLayer(client, ref.registry, d, image, onProgress)
            total.bytes += size.bytes
            total.files += size.files
          } catch (e) {
            queue.length = 0
            throw e
          }
        }
      }))
      const failure = workers.find((w) => w.status === "rejected")
      if (failure !== undefined) throw failure.reason
      if (total.bytes > limits.maxImageBytes) throw new ImagePullError("too_large", `${ref.display} unpacks to more than the ${mib(limits.maxImageBytes)} MiB allowed`)
      if (total.files > limits.maxImageFiles) throw new ImagePullError("too_large", `${ref.display} has more than ${limits.maxImageFiles} files and directories (IMAGE_MAX_FILES)`)
      sweep()
      // While the layers are pinned by this pull: its User, from the image's own files (topmost layer first).
      const c = config.config ?? {}
      user = resolveImageUser(typeof c.User === "string" ? c.User : "", [...digests].reverse().map((d) => layerDir(options.dataDir, d)))
    } finally {
      for (const d of digests) {
        const n = (pulling.get(d) ?? 1) - 1
        if (n <= 0) pulling.delete(d)
        else pulling.set(d, n)
      }
    }
    const c = config.config ?? {}
    const env: Record<string, string> = {}
    for (const entry of c.Env ?? []) {
      const eq = typeof entry === "string" ? entry.indexOf("=") : -1
      if (eq > 0 && !entry.includes("\0")) env[entry.slice(0, eq)] = entry.slice(eq + 1)
    }
    const strings = (v: ReadonlyArray<string> | null | undefined) => (Array.isArray(v) ? v.filter((s): s is string => typeof s === "string") : [])
    const workingDir = typeof c.WorkingDir === "string" && c.WorkingDir.startsWith("/") ? c.WorkingDir : undefined
    return { reference: ref.display, digest: manifest.digest, platform: platformString(platform), layers: digests, env, workingDir, entrypoint: strings(c.Entrypoint), cmd: strings(c.Cmd), user }
  }

  return { pull, sweep, layerDir: (digest: string) => layerDir(options.dataDir, digest), touch }
}

export type ImageCache = ReturnType<typeof makeImageCache>
