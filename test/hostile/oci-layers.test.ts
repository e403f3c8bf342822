/**
 * Hostile image layers: the gateway unpacks them as root, so a layer that tries to write outside its directory
 * (a `..` path, an absolute path, a write through a symlink it planted, a hard link to a host file) is refused
 * and leaves nothing outside; device nodes and setuid bits never appear; the image's /etc/passwd and /etc/group
 * (its User) are read as its root shows them and never through a symlink (to the host's, say); and through the
 * runtime such an image fails the create with `image_pull_failed` (no sandbox runs).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { RuntimeError } from "../../src/runtime/LocalRuntime.ts"
import { ImagePullError } from "../../src/runtime/oci/Errors.ts"
import { makeResolver } from "../../src/net/Targets.ts"
import { DEFAULT_IMAGE_LIMITS, layerDir, makeImageCache } from "../../src/runtime/oci/ImageCache.ts"
import { resolveImageUser } from "../../src/runtime/oci/ImageUser.ts"
import { hostPlatform } from "../../src/runtime/oci/Reference.ts"
import { unpackLayer, type UnpackLimits } from "../../src/runtime/oci/Unpack.ts"
import { failure, newRuntime, run, type TestRuntime } from "../runtime/support.ts"
import { emptyFilesTar, startRegistry, tar, type TarEntry, type TestRegistry } from "../support/registry.ts"

const work = fs.mkdtempSync(path.join(os.tmpdir(), "oci-hostile-"))
const outside = path.join(work, "outside")
let n = 0
/** The runtime's defaults, but 1 MiB of files. */
const LIMITS: UnpackLimits = { maxBytes: 1 << 20, maxFiles: DEFAULT_IMAGE_LIMITS.maxLayerFiles, maxDepth: DEFAULT_IMAGE_LIMITS.maxPathDepth, maxPathBytes: DEFAULT_IMAGE_LIMITS.maxPathBytes }

/** Unpacks `entries` (gzipped) into a fresh directory under `work/layers/`; returns that directory, or the error. */
const unpack = async (entries: Iterable<TarEntry>, limits: Partial<UnpackLimits> = {}): Promise<{ dir: string; error: ImagePullError | undefined }> => {
  const dir = path.join(work, "layers", `l${n++}`)
  fs.mkdirSync(dir, { recursive: true })
  const blob = `${dir}.blob`
  fs.writeFileSync(blob, Bun.gzipSync(tar(entries)))
  try {
    await unpackLayer(blob, dir, { ...LIMITS, ...limits })
    return { dir, error: undefined }
  } catch (e) {
    if (!(e instanceof ImagePullError)) throw e
    return { dir, error: e }
  }
}

beforeAll(() => fs.mkdirSync(outside, { recursive: true }))
afterAll(() => fs.rmSync(work, { recursive: true, force: true }))

describe("layers that try to leave their directory are refused", () => {
  it("a path with ..", async () => {
    const { error } = await unpack([{ name: "ok", data: "fine" }, { name: "../../outside/escaped", data: "pwned" }])
    expect(error?.reason).toBe("unsafe_layer")
    expect(error?.message).toMatch(/leaves the image's root/)
    expect(fs.readdirSync(outside)).toEqual([])
  })

  it("a write through a symlink the layer planted (absolute or relative)", async () => {
    for (const link of [outside, "../../outside"]) {
      const { error } = await unpack([{ name: "evil", type: "symlink", link }, { name: "evil/escaped", data: "pwned" }])
      expect(error?.message).toMatch(/goes through a symlink/)
    }
    expect(fs.readdirSync(outside)).toEqual([])
  })

  it("a hard link to a host file or out of the layer", async () => {
    fs.writeFileSync(path.join(outside, "host-file"), "host")
    for (const link of [path.join(outside, "host-file"), "../../outside/host-file", "etc/passwd"]) {
      const { error } = await unpack([{ name: "stolen", type: "hardlink", link }])
      expect(error?.reason).toBe("unsafe_layer")
    }
    // A hard link through a symlink of the layer is refused too.
    const through = await unpack([{ name: "up", type: "symlink", link: outside }, { name: "stolen", type: "hardlink", link: "up/host-file" }])
    expect(through.error?.message).toMatch(/goes through a symlink/)
    expect(fs.statSync(path.join(outside, "host-file")).nlink).toBe(1)
    fs.rmSync(path.join(outside, "host-file"))
  })

  it("absolute names stay inside (the leading / is dropped)", async () => {
    const { dir, error } = await unpack([{ name: `/${path.relative("/", outside)}/abs`, data: "inside" }])
    expect(error).toBeUndefined()
    expect(fs.readdirSync(outside)).toEqual([])
    expect(fs.readFileSync(path.join(dir, path.relative("/", outside), "abs"), "utf8")).toBe("inside")
  })
})

describe("what a layer may not create", () => {
  it("no device nodes, no setuid or setgid bits; hard links inside the layer work", async () => {
    const { dir, error } = await unpack([
      { name: "dev/", type: "dir" },
      { name: "dev/sda", type: "chr" },
      { name: "bin/", type: "dir" },
      { name: "bin/su", data: "#!/bin/sh\n", mode: 0o4755 },
      { name: "bin/sg", data: "#!/bin/sh\n", mode: 0o2755 },
      { name: "bin/su2", type: "hardlink", link: "bin/su" }
    ])
    expect(error).toBeUndefined()
    expect(fs.existsSync(path.join(dir, "dev/sda"))).toBe(false)
    expect(fs.statSync(path.join(dir, "bin/su")).mode & 0o7777).toBe(0o755)
    expect(fs.statSync(path.join(dir, "bin/sg")).mode & 0o7777).toBe(0o755)
    expect(fs.statSync(path.join(dir, "bin/su2")).ino).toBe(fs.statSync(path.join(dir, "bin/su")).ino)
  })

  it("whiteouts become overlay whiteouts (0/0 character devices), nothing else", async () => {
    const { dir, error } = await unpack([{ name: "etc/", type: "dir" }, { name: "etc/.wh.shadow" }, { name: "etc/.wh..wh..opq" }])
    expect(error).toBeUndefined()
    const st = fs.lstatSync(path.join(dir, "etc/shadow"))
    expect(st.isCharacterDevice()).toBe(true)
    expect(st.rdev).toBe(0)
    expect((await unpack([{ name: "etc/.wh..." }])).error?.reason).toBe("unsafe_layer")
  })

  it("a layer unpacking beyond the size cap is refused", async () => {
    const { error } = await unpack([{ name: "big", data: new Uint8Array(2 << 20) }])
    expect(error?.reason).toBe("too_large")
  })

  it("a corrupt archive is refused", async () => {
    const dir = path.join(work, "corrupt")
    fs.mkdirSync(dir)
    const bytes = Buffer.from(Bun.gzipSync(tar([{ name: "f", data: "x".repeat(5000) }])))
    fs.writeFileSync(`${dir}.blob`, new Uint8Array(bytes.subarray(0, bytes.length - 30)))
    await expect(unpackLayer(`${dir}.blob`, dir, LIMITS)).rejects.toBeInstanceOf(ImagePullError)
  })
})

describe("layers bounded in entries and paths (inodes, lookups, PATH_MAX)", () => {
  it("every entry a layer makes counts, the directories its paths imply included", async () => {
    // 200 files in 200 directories nobody listed: 400 inodes.
    const implied = await unpack(Array.from({ length: 200 }, (_, i): TarEntry => ({ name: `d${i}/f` })), { maxFiles: 300 })
    expect(implied.error?.reason).toBe("too_large")
    expect(implied.error?.message).toMatch(/more than 300 files and directories \(IMAGE_LAYER_MAX_FILES\)/)
    // Links and whiteouts make entries too.
    const links = await unpack([{ name: "f" }, ...Array.from({ length: 20 }, (_, i): TarEntry => ({ name: `l${i}`, type: i % 2 === 0 ? "hardlink" : "symlink", link: "f" }))], { maxFiles: 10 })
    expect(links.error?.reason).toBe("too_large")
    const fits = await unpack(Array.from({ length: 100 }, (_, i): TarEntry => ({ name: `d${i}/f` })), { maxFiles: 200 })
    expect(fits.error).toBeUndefined()
  })

  it("a path nested deeper than IMAGE_MAX_PATH_DEPTH, or longer than IMAGE_MAX_PATH_BYTES, is refused", async () => {
    const deep = (n: number) => Array.from({ length: n }, () => "d").join("/")
    expect((await unpack([{ name: deep(128) }])).error).toBeUndefined()
    const tooDeep = await unpack([{ name: deep(129) }])
    expect(tooDeep.error?.reason).toBe("unsafe_layer")
    expect(tooDeep.error?.message).toMatch(/nested deeper than 128 directories \(IMAGE_MAX_PATH_DEPTH\)/)
    // A hard link's target is a path of the layer too.
    expect((await unpack([{ name: "f" }, { name: "l", type: "hardlink", link: `${deep(129)}/f` }])).error?.message).toMatch(/nested deeper/)
    const long = (bytes: number) => Array.from({ length: Math.ceil(bytes / 201) }, () => "n".repeat(200)).join("/").slice(0, bytes)
    expect((await unpack([{ name: long(2000) }])).error).toBeUndefined()
    const tooLong = await unpack([{ name: long(2100) }])
    expect(tooLong.error?.message).toMatch(/path longer than 2048 bytes \(IMAGE_MAX_PATH_BYTES\)/)
    expect((await unpack([{ name: "x".repeat(256) }])).error?.message).toMatch(/name longer than 255 bytes/)
    expect((await unpack([{ name: "s", type: "symlink", link: `/${long(3000)}` }])).error?.message).toMatch(/target longer than 2048 bytes/)
  })

  it("a layer that keeps replacing its own directories (each time the known directories are looked up again) is refused", async () => {
    const flips = (n: number) => Array.from({ length: n }, (): Array<TarEntry> => [{ name: "a/b/c/", type: "dir" }, { name: "a/b/c", data: "now a file" }]).flat()
    expect((await unpack(flips(1001))).error?.message).toMatch(/replaces more than 1000 of its own directories/)
    expect((await unpack(flips(10))).error).toBeUndefined()
  })

  it("a run of metadata headers (PAX, long names) with no entry to describe is refused", async () => {
    const headers = Array.from({ length: 17 }, (): TarEntry => ({ name: "PaxHeader", type: "pax", data: "19 comment=padding\n" }))
    expect((await unpack([...headers, { name: "f" }])).error?.message).toMatch(/too many tar metadata entries in a row/)
    expect((await unpack([...headers.slice(0, 3), { name: "f" }])).error).toBeUndefined()
  })
})

describe("the host's file system", () => {
  // A small file system of the test's own (a tmpfs of 8 MiB and 500 inodes) as the cache's DATA_DIR.
  const mount = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-oci-full-"))
  let registry: TestRegistry
  beforeAll(() => {
    const mounted = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=8m,nr_inodes=500,mode=0700", "tmpfs", mount], { stderr: "pipe" })
    if (mounted.exitCode !== 0) throw new Error(`mount: ${mounted.stderr.toString()}`)
    registry = startRegistry()
  })
  afterAll(() => {
    registry.stop()
    // Lazily: a read stream of the last unpack may still be closing.
    const unmounted = Bun.spawnSync(["umount", "-l", mount], { stderr: "pipe" })
    if (unmounted.exitCode !== 0) throw new Error(`umount: ${unmounted.stderr.toString()}`)
    fs.rmdirSync(mount)
  })

  it("no layer is unpacked while it has less than 5% of its inodes or space free", async () => {
    const cache = makeImageCache({
      dataDir: mount,
      policy: { allowPrivate: true, purpose: "image pulls", setting: "REGISTRY_ALLOW_PRIVATE", resolver: makeResolver([]) },
      limits: DEFAULT_IMAGE_LIMITS,
      inUse: () => new Set()
    })
    const pull = (image: string) => cache.pull(`${registry.host}/${image}`, hostPlatform()).then(() => undefined, (e: unknown) => e as ImagePullError)
    const filler = path.join(mount, "filler")
    fs.mkdirSync(filler)
    // Leave 10 inodes: a 3-file layer would fit, but in the last 5%.
    const free = () => fs.statfsSync(mount).ffree
    for (let i = 0; free() > 10; i++) fs.writeFileSync(path.join(filler, `f${i}`), "")
    registry.push("full/inodes", "1", { layers: [[{ name: "a" }, { name: "b" }, { name: "c" }]] })
    const refused = await pull("full/inodes:1")
    expect(refused?.reason).toBe("cache_full")
    expect(refused?.message).toMatch(/the host's disk is too full to unpack the image/)
    fs.rmSync(filler, { recursive: true })
    expect(await pull("full/inodes:1")).toBeUndefined()
    // Space: leave under 5% of the 8 MiB.
    fs.writeFileSync(path.join(mount, "big"), new Uint8Array(Math.floor(fs.statfsSync(mount).bavail * 4096 - 200 * 1024)))
    registry.push("full/space", "1", { layers: [[{ name: "s", data: "small" }]] })
    expect((await pull("full/space:1"))?.message).toMatch(/too full/)
    fs.rmSync(path.join(mount, "big"))
    expect(await pull("full/space:1")).toBeUndefined()
  }, 60_000)
})

describe("an image's /etc/passwd and /etc/group (its User), read as its root shows them, never through a link", () => {
  const PASSWD = "app:x:1234:1234::/home/app:/bin/sh\n"
  const base = () => unpack([{ name: "etc/", type: "dir" }, { name: "etc/passwd", data: PASSWD }, { name: "etc/group", data: "staff:x:50:\n" }])
  /** Resolves `user` in the layers (bottom first, as a manifest lists them): its uid, or the refusal's message. */
  const resolve = (user: string, ...layers: Array<{ dir: string; error: ImagePullError | undefined }>) => {
    for (const l of layers) expect(l.error).toBeUndefined()
    try {
      return resolveImageUser(user, layers.map((l) => l.dir).reverse()).uid
    } catch (e) {
      if (!(e instanceof ImagePullError)) throw e
      return e.message
    }
  }

  it("a symlink to the host's files (the file, or /etc) is not followed: the user is not found", async () => {
    // The host's /etc/passwd has root; the image's link to it must not lend it.
    expect(fs.readFileSync("/etc/passwd", "utf8")).toMatch(/^root:/m)
    for (const link of ["/etc/passwd", "../../../../../../../../etc/passwd"]) {
      const planted = await unpack([{ name: "etc/", type: "dir" }, { name: "etc/passwd", type: "symlink", link }])
      expect(resolve("root", planted)).toMatch(/no user "root" in the image's \/etc\/passwd \(the image has no usable \/etc\/passwd: it is a symlink\)/)
    }
    const etc = await unpack([{ name: "etc", type: "symlink", link: "/etc" }])
    expect(resolve("root", etc)).toMatch(/no user "root" .*there is none/)
    expect(resolve("app:root", await base(), await unpack([{ name: "etc/", type: "dir" }, { name: "etc/group", type: "symlink", link: "/etc/group" }]))).toMatch(
      /no group "root" .*it is a symlink/
    )
    // A link lower down does not show through a real file above it, nor the file through a link above.
    expect(resolve("app", await unpack([{ name: "etc", type: "symlink", link: "/etc" }]), await base())).toBe(1234)
    expect(resolve("app", await base(), await unpack([{ name: "etc", type: "symlink", link: "/etc" }]))).toMatch(/there is none/)
  })

  it("a file larger than 1 MiB is not read", async () => {
    const huge = await unpack([{ name: "etc/", type: "dir" }, { name: "etc/passwd", data: `${"#".repeat(1 << 20)}\n${PASSWD}` }], { maxBytes: 4 << 20 })
    expect(resolve("app", huge)).toMatch(/it is larger than 1024 KiB/)
    // A uid needs no entry: it still runs.
    expect(resolve("1234", huge)).toBe(1234)
  })

  it("an upper layer's whiteout or opaque directory hides the file below; a file replacing /etc hides it too", async () => {
    expect(resolve("app", await base())).toBe(1234)
    expect(resolve("app", await base(), await unpack([{ name: "etc/", type: "dir" }, { name: "etc/.wh.passwd" }]))).toMatch(/no user "app" .*there is none/)
    expect(resolve("app", await base(), await unpack([{ name: ".wh.etc" }]))).toMatch(/there is none/)
    expect(resolve("app", await base(), await unpack([{ name: "etc/", type: "dir" }, { name: "etc/.wh..wh..opq" }, { name: "etc/hostname", data: "x" }]))).toMatch(/there is none/)
    expect(resolve("app", await base(), await unpack([{ name: "etc", data: "not a directory" }]))).toMatch(/there is none/)
    // Deleted, then put back by a layer above: the topmost wins.
    expect(resolve("app", await base(), await unpack([{ name: "etc/", type: "dir" }, { name: "etc/.wh.passwd" }]), await unpack([{ name: "etc/", type: "dir" }, { name: "etc/passwd", data: "app:x:77:77::/:/bin/sh\n" }]))).toBe(77)
  })
})

describe("through the runtime", () => {
  // The test registry is on loopback: allowed here explicitly (REGISTRY_ALLOW_PRIVATE).
  const hostile = newRuntime("oci-hostile", { registryAllowPrivate: true })
  const { rt, dataDir } = hostile
  const counted = newRuntime("oci-counts", { registryAllowPrivate: true, imageLimits: { maxLayerFiles: 300, maxImageFiles: 500, maxCacheFiles: 900 } })
  let registry: TestRegistry
  beforeAll(() => {
    registry = startRegistry()
  })
  afterAll(async () => {
    await hostile.cleanup()
    await counted.cleanup()
    registry.stop()
  })

  const create = (runtime: TestRuntime, id: string, reference: string) =>
    run(runtime.rt.create({ id, vcpu: 1, memoryMb: 128, diskMb: 64, internet: false, image: { reference: `${registry.host}/${reference}` } }))
  const pullFailure = async (runtime: TestRuntime, id: string, reference: string) => {
    const e = (await failure(runtime.rt.create({ id, vcpu: 1, memoryMb: 128, diskMb: 64, internet: false, image: { reference: `${registry.host}/${reference}` } }))) as RuntimeError
    expect(e.kind).toBe("image_pull_failed")
    expect(fs.existsSync(path.join(runtime.dataDir, "sandboxes", id))).toBe(false)
    return e.message
  }
  /** Every file and directory of the image cache (layers, their records, downloads and unpacks in progress). */
  const cacheEntries = (dir: string) => fs.readdirSync(path.join(dir, "images"), { recursive: true }).length
  /** What the cached layers hold: every entry inside a layer's directory. */
  const layerEntries = (dir: string) => {
    const layers = path.join(dir, "images", "layers")
    return fs.readdirSync(layers).filter((n) => !n.endsWith(".json")).reduce((sum, n) => sum + fs.readdirSync(path.join(layers, n), { recursive: true }).length, 0)
  }
  /** `n` empty files in one layer (each a tar header: 512 bytes that gzip to almost nothing). */
  const emptyFiles = function*(n: number, prefix = "f"): Generator<TarEntry> {
    for (let i = 0; i < n; i++) yield { name: `${prefix}${i}` }
  }

  it("a layer of 200,000 empty files (an inode bomb of about 1 MB) fails with image_pull_failed and leaves nothing behind", async () => {
    const layer = emptyFilesTar(200_000)
    expect(Bun.gzipSync(layer).length).toBeLessThan(2 * 1024 * 1024)
    registry.push("evil/inodes", "1", { layers: [layer] })
    const before = cacheEntries(dataDir)
    const message = await pullFailure(hostile, "i1", "evil/inodes:1")
    expect(message).toMatch(/more than 100000 files and directories \(IMAGE_LAYER_MAX_FILES\)/)
    expect(cacheEntries(dataDir)).toBe(before)
    expect(fs.readdirSync(path.join(dataDir, "images", "tmp"))).toEqual([])
  }, 120_000)

  it("an image with a path nested too deep fails with image_pull_failed", async () => {
    registry.push("evil/deep", "1", { layers: [[{ name: `${Array.from({ length: 200 }, () => "d").join("/")}/f`, data: "x" }]] })
    const before = cacheEntries(dataDir)
    expect(await pullFailure(hostile, "deep1", "evil/deep:1")).toMatch(/nested deeper than 128 directories/)
    expect(cacheEntries(dataDir)).toBe(before)
  }, 60_000)

  it("IMAGE_MAX_FILES bounds an image's layers together; IMAGE_LAYER_MAX_FILES each layer", async () => {
    registry.push("count/wide", "1", { layers: [[...emptyFiles(200, "a")], [...emptyFiles(200, "b")], [...emptyFiles(200, "c")]] })
    expect(await pullFailure(counted, "w1", "count/wide:1")).toMatch(/more than 500 files and directories \(IMAGE_MAX_FILES\)/)
    registry.push("count/thick", "1", { layers: [[...emptyFiles(301)]] })
    expect(await pullFailure(counted, "t1", "count/thick:1")).toMatch(/more than 300 files and directories \(IMAGE_LAYER_MAX_FILES\)/)
    expect(fs.readdirSync(path.join(counted.dataDir, "images", "tmp"))).toEqual([])
  }, 60_000)

  it("IMAGE_CACHE_MAX_FILES bounds the cache: a pull that cannot make room fails; once a sandbox is gone its layers make room", async () => {
    registry.push("count/x", "1", { layers: [[...emptyFiles(250, "x")], [...emptyFiles(250, "y")]] })
    const y = registry.push("count/y", "1", { layers: [[...emptyFiles(250, "z")], [...emptyFiles(250, "w")]] })
    await create(counted, "cx", "count/x:1")
    // x's 500 entries are in use: y's second layer finds no room (a complete first layer may stay, cached).
    expect(await pullFailure(counted, "cy", "count/y:1")).toMatch(/the image cache is full .*IMAGE_CACHE_MAX_FILES 900/)
    expect(layerEntries(counted.dataDir)).toBeLessThanOrEqual(900)
    expect(fs.readdirSync(path.join(counted.dataDir, "images", "tmp"))).toEqual([])
    await run(counted.rt.destroy("cx"))
    await create(counted, "cy", "count/y:1")
    expect(layerEntries(counted.dataDir)).toBeLessThanOrEqual(900)
    for (const layer of y.layers) expect(fs.existsSync(layerDir(counted.dataDir, layer))).toBe(true)
    await run(counted.rt.destroy("cy"))
  }, 60_000)

  it("an image with an escaping layer fails the create with image_pull_failed; nothing escaped", async () => {
    registry.push("evil/escape", "1", { layers: [[{ name: "../../../../../../tmp/oci-escaped", data: "pwned" }]] })
    registry.push("evil/link", "1", { layers: [[{ name: "x", type: "hardlink", link: "/etc/shadow" }]] })
    for (const [id, ref] of [["e1", "evil/escape:1"], ["e2", "evil/link:1"]] as const) {
      const e = (await failure(rt.create({ id, vcpu: 1, memoryMb: 128, diskMb: 64, internet: false, image: { reference: `${registry.host}/${ref}` } }))) as RuntimeError
      expect(e.kind).toBe("image_pull_failed")
      expect(e.message).toMatch(/unsafe/)
    }
    expect(fs.existsSync("/tmp/oci-escaped")).toBe(false)
    expect(fs.statSync("/etc/shadow").nlink).toBe(1)
  }, 60_000)
})
