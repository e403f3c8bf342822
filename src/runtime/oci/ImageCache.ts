/**
 * The image layer cache, shared by every sandbox of a DATA_DIR (root only, like the rest of it):
 *   images/layers/<hex>/       a layer unpacked (Unpack.ts), named by the sha256 of its blob: content-addressed,
 *                              read-only to sandboxes (an idmapped overlayfs lower layer, Jail.ts)
 *   images/layers/<hex>.json   its sizes; its mtime is its last use (the LRU clock)
 *   images/tmp/                downloads and unpacks in progress (renamed into place when complete)
 * A layer is pulled once: concurrent pulls of one layer share one download, and a layer already there is not
 * fetched again (the manifest is, since tags move). After each pull, the least recently used layers that no
 * sandbox uses are removed while the cache is above its cap.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { ImagePullError } from "./Errors.ts"
import { type ImageReference, parseReference, platformMatches, platformString, type Platform } from "./Reference.ts"
import { type Descriptor, makeRegistryClient } from "./Registry.ts"
import { unpackLayer } from "./Unpack.ts"

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
}

export type PullProgress =
  | { readonly phase: "resolved"; readonly digest: string; readonly layers: number; readonly bytes: number }
  | { readonly phase: "layer"; readonly digest: string; readonly cached: boolean; readonly bytes: number }

export interface ImageCacheOptions {
  readonly dataDir: string
  /** A Docker-style auth file (REGISTRY_AUTH_FILE). */
  readonly authFile?: string | undefined
  /** Largest image, compressed and unpacked (IMAGE_MAX_MB). */
  readonly maxImageBytes: number
  /** The cache is swept down to this (IMAGE_CACHE_MB). */
  readonly maxCacheBytes: number
  /** Layer digests running sandboxes use: never swept. */
  readonly inUse: () => ReadonlySet<string>
}

const hexOf = (digest: string) => digest.slice("sha256:".length)
const PARALLEL_LAYERS = 3

export const imagesDir = (dataDir: string) => path.join(dataDir, "images")
export const layerDir = (dataDir: string, digest: string) => path.join(imagesDir(dataDir), "layers", hexOf(digest))

export const makeImageCache = (options: ImageCacheOptions) => {
  const root = imagesDir(options.dataDir)
  const layersDir = path.join(root, "layers")
  const tmpDir = path.join(root, "tmp")
  for (const dir of [root, layersDir, tmpDir]) fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  fs.chmodSync(root, 0o700)
  // Leftovers of a crashed pull.
  for (const name of fs.readdirSync(tmpDir)) fs.rmSync(path.join(tmpDir, name), { recursive: true, force: true })

  const inflight = new Map<string, Promise<number>>()
  const pulling = new Set<string>()

  const meta = (digest: string) => path.join(layersDir, `${hexOf(digest)}.json`)
  const cachedSize = (digest: string): number | undefined => {
    try {
      if (!fs.statSync(layerDir(options.dataDir, digest)).isDirectory()) return undefined
      const m = JSON.parse(fs.readFileSync(meta(digest), "utf8")) as { unpacked?: unknown }
      return typeof m.unpacked === "number" ? m.unpacked : undefined
    } catch {
      return undefined
    }
  }
  const touch = (digest: string) => {
    const now = new Date()
    try {
      fs.utimesSync(meta(digest), now, now)
    } catch {}
  }

  /** The layer unpacked in the cache (downloaded once, however many pulls ask at the same time); its unpacked size. */
  const ensureLayer = (client: ReturnType<typeof makeRegistryClient>, d: Descriptor, onProgress: (p: PullProgress) => void): Promise<number> => {
    const cached = cachedSize(d.digest)
    if (cached !== undefined) {
      touch(d.digest)
      onProgress({ phase: "layer", digest: d.digest, cached: true, bytes: d.size })
      return Promise.resolve(cached)
    }
    const running = inflight.get(d.digest)
    if (running !== undefined) return running
    const work = (async () => {
      const tag = `${hexOf(d.digest)}.${process.pid}.${crypto.randomUUID()}`
      const blob = path.join(tmpDir, `${tag}.blob`)
      const unpacked = path.join(tmpDir, `${tag}.dir`)
      try {
        await client.download(d, blob, () => undefined)
        fs.mkdirSync(unpacked, { mode: 0o755 })
        const size = await unpackLayer(blob, unpacked, { maxBytes: options.maxImageBytes })
        fs.chmodSync(unpacked, 0o755)
        fs.writeFileSync(meta(d.digest), JSON.stringify({ compressed: d.size, unpacked: size }), { mode: 0o600 })
        try {
          fs.renameSync(unpacked, layerDir(options.dataDir, d.digest))
        } catch (e) {
          // Another gateway on this DATA_DIR put the same content there first.
          if (cachedSize(d.digest) === undefined) throw e
        }
        onProgress({ phase: "layer", digest: d.digest, cached: false, bytes: d.size })
        return size
      } finally {
        fs.rmSync(blob, { force: true })
        fs.rmSync(unpacked, { recursive: true, force: true })
      }
    })().finally(() => inflight.delete(d.digest))
    inflight.set(d.digest, work)
    return work
  }

  /** Removes the least recently used layers no sandbox uses (nor a pull in progress) while above the cap. */
  const sweep = (keep: ReadonlySet<string> = new Set()): Array<string> => {
    const used = new Set([...options.inUse(), ...keep, ...pulling, ...inflight.keys()])
    const entries = fs.readdirSync(layersDir).filter((n) => n.endsWith(".json")).flatMap((n) => {
      const digest = `sha256:${n.slice(0, -5)}`
      try {
        const m = JSON.parse(fs.readFileSync(path.join(layersDir, n), "utf8")) as { unpacked?: number; compressed?: number }
        return [{ digest, bytes: m.unpacked ?? 0, used: fs.statSync(path.join(layersDir, n)).mtimeMs }]
      } catch {
        return []
      }
    })
    let total = entries.reduce((s, e) => s + e.bytes, 0)
    const removed: Array<string> = []
    for (const e of entries.sort((a, b) => a.used - b.used)) {
      if (total <= options.maxCacheBytes) break
      if (used.has(e.digest)) continue
      fs.rmSync(layerDir(options.dataDir, e.digest), { recursive: true, force: true })
      fs.rmSync(meta(e.digest), { force: true })
      total -= e.bytes
      removed.push(e.digest)
    }
    return removed
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
    const client = makeRegistryClient(ref, { authFile: options.authFile })
    const manifest = await client.manifest(platform)
    const compressed = manifest.layers.reduce((s, l) => s + l.size, 0)
    if (compressed > options.maxImageBytes) {
      throw new ImagePullError("too_large", `${ref.display} is ${Math.ceil(compressed / 1048576)} MiB, more than the ${Math.floor(options.maxImageBytes / 1048576)} MiB allowed`)
    }
    onProgress({ phase: "resolved", digest: manifest.digest, layers: manifest.layers.length, bytes: compressed })
    const config = await client.config(manifest.config)
    if ((config.os !== undefined || config.architecture !== undefined) && !platformMatches(platform, { os: config.os, architecture: config.architecture, variant: config.variant })) {
      throw new ImagePullError("wrong_platform", `${ref.display} is built for ${config.os ?? "?"}/${config.architecture ?? "?"}, this host runs ${platformString(platform)}`)
    }
    const digests = manifest.layers.map((l) => l.digest)
    for (const d of digests) pulling.add(d)
    try {
      let unpacked = 0
      const queue = [...manifest.layers]
      await Promise.all(Array.from({ length: Math.min(PARALLEL_LAYERS, queue.length) }, async () => {
        for (let d = queue.shift(); d !== undefined; d = queue.shift()) unpacked += await ensureLayer(client, d, onProgress)
      }))
      if (unpacked > options.maxImageBytes) {
        throw new ImagePullError("too_large", `${ref.display} unpacks to more than the ${Math.floor(options.maxImageBytes / 1048576)} MiB allowed`)
      }
      sweep(new Set(digests))
    } finally {
      for (const d of digests) pulling.delete(d)
    }
    const c = config.config ?? {}
    const env: Record<string, string> = {}
    for (const entry of c.Env ?? []) {
      const eq = typeof entry === "string" ? entry.indexOf("=") : -1
      if (eq > 0 && !entry.includes("\0")) env[entry.slice(0, eq)] = entry.slice(eq + 1)
    }
    const strings = (v: ReadonlyArray<string> | null | undefined) => (Array.isArray(v) ? v.filter((s): s is string => typeof s === "string") : [])
    const workingDir = typeof c.WorkingDir === "string" && c.WorkingDir.startsWith("/") ? c.WorkingDir : undefined
    return { reference: ref.display, digest: manifest.digest, platform: platformString(platform), layers: digests, env, workingDir, entrypoint: strings(c.Entrypoint), cmd: strings(c.Cmd) }
  }

  return { pull, sweep, layerDir: (digest: string) => layerDir(options.dataDir, digest), touch }
}

export type ImageCache = ReturnType<typeof makeImageCache>
