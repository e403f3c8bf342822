/**
 * Hostile image layers: the gateway unpacks them as root, so a layer that tries to write outside its directory
 * (a `..` path, an absolute path, a write through a symlink it planted, a hard link to a host file) is refused
 * and leaves nothing outside; device nodes and setuid bits never appear; and through the runtime such an image
 * fails the create with `image_pull_failed` (no sandbox runs).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { RuntimeError } from "../../src/runtime/LocalRuntime.ts"
import { ImagePullError } from "../../src/runtime/oci/Errors.ts"
import { DEFAULT_IMAGE_LIMITS } from "../../src/runtime/oci/ImageCache.ts"
import { unpackLayer, type UnpackLimits } from "../../src/runtime/oci/Unpack.ts"
import { failure, newRuntime } from "../runtime/support.ts"
import { startRegistry, tar, type TarEntry, type TestRegistry } from "../support/registry.ts"

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

describe("through the runtime", () => {
  const { rt, cleanup } = newRuntime("oci-hostile", { registryAllowPrivate: true })
  let registry: TestRegistry
  beforeAll(() => {
    registry = startRegistry()
  })
  afterAll(async () => {
    await cleanup()
    registry.stop()
  })

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
