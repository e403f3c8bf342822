/**
 * Sandboxes on OCI images, pulled from a registry on loopback (test/support/registry.ts, with Docker Hub's
 * bearer-token flow; the runtimes here allow it with REGISTRY_ALLOW_PRIVATE): the image's files and nothing of the host's system, its config applied
 * as a container runtime applies it (Env, WorkingDir, User, Entrypoint and Cmd), writes
 * private to each sandbox, layers pulled once (also by concurrent creates), an image without glibc (static
 * busybox, like Alpine) and one without a shell (like distroless), and every way a pull fails.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { RuntimeError } from "../../src/runtime/LocalRuntime.ts"
import { layerDir } from "../../src/runtime/oci/ImageCache.ts"
import { alpineLike, busybox, distrolessLike, startRegistry, type TestRegistry } from "../support/registry.ts"
import { collect, failure, newRuntime, run, sh } from "./support.ts"
import { tempDataDir } from "../support/server.ts"

const { dataDir, rt, cleanup } = newRuntime("oci", { imageMaxMb: 64, registryAllowPrivate: true })
let registry: TestRegistry
let alpine: { digest: string; manifest: string; layers: ReadonlyArray<string> }
const spec = (id: string, reference: string, extra: { command?: Array<string>; platform?: string } = {}) => ({
  id,
  vcpu: 1,
  memoryMb: 256,
  diskMb: 256,
  internet: false,
  env: { FROM_REQUEST: "yes" },
  image: { reference, ...extra }
})
const pullFailure = async (id: string, reference: string, extra: { platform?: string } = {}) => {
  const e = (await failure(rt.create(spec(id, reference, extra)))) as RuntimeError
  expect(e.kind).toBe("image_pull_failed")
  expect(fs.existsSync(`${dataDir}/sandboxes/${id}`)).toBe(false)
  return e.message
}

beforeAll(() => {
  registry = startRegistry()
  alpine = registry.push("test/alpine", "3.20", {
    index: true,
    env: ["PATH=/usr/local/bin:/bin", "GREETING=hello from the image", "FROM_REQUEST=image"],
    workingDir: "/srv/app",
    entrypoint: ["/bin/echo", "entrypoint"],
    cmd: ["default"],
    layers: [
      [...alpineLike(), { name: "etc/gone", data: "deleted above\n" }, { name: "opaque/", type: "dir" }, { name: "opaque/a", data: "a\n" }],
      [{ name: "etc/.wh.gone" }, { name: "opaque/" , type: "dir" }, { name: "opaque/.wh..wh..opq" }, { name: "opaque/b", data: "b\n" }, { name: "srv/app/", type: "dir" }]
    ]
  })
  registry.push("test/distroless", "latest", { layers: [distrolessLike()], env: ["PATH=/app"] })
})
afterAll(async () => {
  await cleanup()
  registry.stop()
})

describe("a sandbox on an image without glibc (static busybox)", () => {
  beforeAll(async () => {
    const created = await run(rt.create(spec("img1", `${registry.host}/test/alpine:3.20`, { command: ["from", "the", "request"] })))
    expect(created.image?.digest).toBe(alpine.manifest)
    expect(created.image?.reference).toBe(`${registry.host}/test/alpine:3.20`)
  }, 60_000)

  it("sees the image's files, not the host's /usr", async () => {
    const r = await sh(rt, "img1", "cat /etc/os-release; ls /usr; ls /usr/bin 2>&1; cat /usr/share/image-marker; ls /lib /lib64 2>&1 | head -2")
    expect(r.exit.exitCode).toBe(0)
    expect(r.stdout).toContain('NAME="TestAlpine"')
    expect(r.stdout).toContain("from the image")
    expect(r.stdout).not.toMatch(/python|bash/)
    expect(r.stdout).toMatch(/\/usr\/bin.*No such file/)
  })

  it("applies the image's Env (under the request's), WorkingDir and User (none: root, as Docker runs it) to every process", async () => {
    const r = await sh(rt, "img1", 'echo "$GREETING|$FROM_REQUEST|$PATH"; pwd; id -u; id -g')
    expect(r.stdout.split("\n")).toEqual(["hello from the image|yes|/usr/local/bin:/bin", "/srv/app", "0", "0", ""])
    const other = await sh(rt, "img1", "pwd", { cwd: "/tmp" })
    expect(other.stdout).toBe("/tmp\n")
  })

  it("applies whiteouts and opaque directories of upper layers", async () => {
    const r = await sh(rt, "img1", "ls /etc; ls /opaque")
    expect(r.stdout).not.toContain("gone")
    expect(r.stdout).toContain("os-release")
    expect(r.stdout).toMatch(/\nb\n$/)
    expect(r.stdout).not.toMatch(/^a$/m)
  })

  it("ran the request's command as the image's would run: after its Entrypoint", async () => {
    const started = await run(rt.exec("img1", { command: ["ignored"], maxOutputBytes: 1000, tag: "image-command" }))
    const done = await collect(rt, "img1", started.execId)
    expect(done.stdout).toBe("entrypoint from the request\n")
  })

  it("owns its root: writes go to its own layer, private to it, and the cache is untouched", async () => {
    const w = await sh(rt, "img1", "echo mine > /etc/os-release && echo new > /bin/added && cat /etc/os-release && touch /srv/app/x")
    expect(w.exit.exitCode).toBe(0)
    expect(w.stdout).toBe("mine\n")
    await run(rt.create(spec("img2", `${registry.host}/test/alpine:3.20`)))
    const other = await sh(rt, "img2", "cat /etc/os-release; ls /bin/added 2>&1")
    expect(other.stdout).toContain('NAME="TestAlpine"')
    expect(other.stdout).toContain("No such file")
    for (const layer of alpine.layers) expect(fs.readdirSync(layerDir(dataDir, layer)).includes("added")).toBe(false)
    expect(fs.readFileSync(`${layerDir(dataDir, alpine.layers[0]!)}/etc/os-release`, "utf8")).toContain("TestAlpine")
    await run(rt.destroy("img2"))
  }, 60_000)

  it("reuses cached layers: a second sandbox downloads no blob", async () => {
    const before = new Map(registry.blobGets)
    await run(rt.create(spec("img3", `${registry.host}/test/alpine:3.20`)))
    for (const layer of alpine.layers) expect(registry.blobGets.get(layer)).toBe(before.get(layer))
    expect(registry.tokens.issued).toBeGreaterThan(0)
    await run(rt.destroy("img3"))
  }, 60_000)
})

describe("the image config, applied as a container runtime applies it", () => {
  const users = (tag: string, config: { user?: string; workingDir?: string; env?: Array<string>; entrypoint?: Array<string>; cmd?: Array<string> }) =>
    registry.push("test/users", tag, {
      ...config,
      layers: [[
        ...alpineLike("Users"),
        { name: "etc/passwd", data: "root:x:0:0:root:/root:/bin/sh\napp:x:1234:2345:App:/home/app:/bin/sh\n" },
        { name: "etc/group", data: "root:x:0:\nstaff:x:50:app\n" },
        { name: "home/app/", type: "dir" },
        { name: "root/", type: "dir" },
        { name: "srv/", type: "dir" },
        { name: "srv/index.html", data: "served by the image's Cmd\n" }
      ]]
    })
  const create = (id: string, tag: string, image: { command?: Array<string>; idle?: boolean } = {}) =>
    run(rt.create({ id, vcpu: 1, memoryMb: 128, diskMb: 64, internet: false, image: { reference: `${registry.host}/test/users:${tag}`, ...image } }))
  /** The image's own command: the execution tagged image-command (asking for it again finds it). */
  const imageCommand = async (id: string) => collect(rt, id, (await run(rt.exec(id, { command: ["unused"], maxOutputBytes: 1000, tag: "image-command" }))).execId)

  beforeAll(() => {
    // No User (root), no WorkingDir (/): its Cmd notes where and as whom it runs, then serves port 80 (as nginx would).
    users("root", { cmd: ["sh", "-c", "pwd > /srv/cwd; id -u > /srv/uid; exec /bin/busybox httpd -f -p 80 -h /srv"] })
    users("app", { user: "app", workingDir: "/srv", entrypoint: ["/bin/sh", "-c"], cmd: ['echo "$HOME $(id -u):$(id -g) $(pwd)" > /srv/ran'] })
    users("numeric", { user: "4321:staff", env: ["PATH=/bin", "HOME=/custom"] })
    users("ghost", { user: "ghost" })
  })

  it("no User is root (its /etc/passwd home); no WorkingDir is /; its Cmd runs once at start, and a server it starts serves", async () => {
    await create("u-root", "root")
    const r = await sh(rt, "u-root", 'id -u; id -g; echo "$HOME $USER"; pwd; grep CapEff /proc/self/status')
    expect(r.stdout).toBe("0\n0\n/root root\n/\nCapEff:\t0000000000000000\n")
    // The server the Cmd started answers (once it listens): in the sandbox, and through the runtime's port bridge.
    const served = await sh(rt, "u-root", "until wget -qO- http://127.0.0.1/index.html 2>/dev/null; do sleep 0.1; done; cat /srv/cwd /srv/uid")
    expect(served.stdout).toBe("served by the image's Cmd\n/\n0\n")
    const socket = await run(rt.connectPort("u-root", 80))
    const page = await new Promise<string>((resolve, reject) => {
      let text = ""
      socket.on("data", (d: Buffer) => (text += d.toString()))
      socket.on("close", () => resolve(text))
      socket.on("error", reject)
      socket.write("GET /index.html HTTP/1.0\r\n\r\n")
      socket.resume() // handed over paused
    })
    expect(page).toMatch(/^HTTP\/1\.[01] 200[\s\S]*served by the image's Cmd\n$/)
    expect((await run(rt.getExec("u-root", (await run(rt.exec("u-root", { command: ["x"], maxOutputBytes: 10, tag: "image-command" }))).execId))).state).toBe("running")
    await run(rt.destroy("u-root"))
  }, 60_000)

  it("a User by name runs as its uid and gid, with its home; the Entrypoint and Cmd run in the WorkingDir as that user; the sandbox outlives them", async () => {
    await create("u-app", "app")
    const r = await sh(rt, "u-app", 'id -u; id -g; echo "$HOME $USER"; pwd')
    expect(r.stdout).toBe("1234\n2345\n/home/app app\n/srv\n")
    // Any user may listen below 1024, as in a container.
    expect((await sh(rt, "u-app", "/bin/busybox httpd -p 81 -h /srv && echo bound")).stdout).toBe("bound\n")
    const ran = await imageCommand("u-app")
    expect(ran.exit.exitCode).toBe(0)
    expect((await sh(rt, "u-app", "cat /srv/ran")).stdout).toBe("/home/app 1234:2345 /srv\n")
    // Its files are its own (the image's, idmapped to the sandbox's one host uid).
    expect((await sh(rt, "u-app", "stat -c %u:%g /srv /srv/index.html; touch /etc/mine && echo writable")).stdout).toBe("1234:2345\n1234:2345\nwritable\n")
    await run(rt.destroy("u-app"))
  }, 60_000)

  it("uid:group takes the group from /etc/group; the image's Env overrides the home; no Entrypoint or Cmd starts nothing", async () => {
    await create("u-num", "numeric")
    const r = await sh(rt, "u-num", 'id -u; id -g; echo "$HOME"')
    expect(r.stdout).toBe("4321\n50\n/custom\n")
    expect((await imageCommand("u-num")).stdout).toBe("")
    await run(rt.destroy("u-num"))
  }, 60_000)

  it("a command replaces the Cmd after the Entrypoint; idle starts nothing", async () => {
    await create("u-cmd", "app", { command: ["echo given > /srv/given; pwd >> /srv/given"] })
    expect((await imageCommand("u-cmd")).exit.exitCode).toBe(0)
    expect((await sh(rt, "u-cmd", "cat /srv/given; ls /srv/ran 2>&1")).stdout).toMatch(/^given\n\/srv\n.*No such file/)
    await run(rt.destroy("u-cmd"))
    await create("u-idle", "app", { idle: true })
    expect((await sh(rt, "u-idle", "ls /srv/ran 2>&1")).stdout).toMatch(/No such file/)
    await run(rt.destroy("u-idle"))
  }, 60_000)

  it("a User the image does not have fails the create, naming the user and the image; no sandbox runs", async () => {
    const e = (await failure(rt.create({ id: "u-ghost", vcpu: 1, memoryMb: 128, diskMb: 64, internet: false, image: { reference: `${registry.host}/test/users:ghost` } }))) as RuntimeError
    expect(e.kind).toBe("image_pull_failed")
    expect(e.message).toBe(`${registry.host}/test/users:ghost: its User "ghost": no user "ghost" in the image's /etc/passwd`)
    expect(fs.existsSync(`${dataDir}/sandboxes/u-ghost`)).toBe(false)
  }, 60_000)
})

describe("a sandbox on an image without a shell", () => {
  it("runs its program; the agent needs nothing of the image", async () => {
    await run(rt.create(spec("dl1", `${registry.host}/test/distroless`)))
    const exec = await run(rt.exec("dl1", { command: ["busybox", "cat", "/etc/os-release"], maxOutputBytes: 1 << 16 }))
    const r = await collect(rt, "dl1", exec.execId)
    expect(r.exit.exitCode).toBe(0)
    expect(r.stdout).toContain("TestDistroless")
    const noShell = await run(rt.exec("dl1", { command: ["/bin/sh", "-c", "echo hi"], maxOutputBytes: 1 << 16 }))
    expect((await collect(rt, "dl1", noShell.execId)).exit.exitCode).not.toBe(0)
    await run(rt.writeFile("dl1", "/workspace/f", Buffer.from("files work"), { mode: "create", createParents: false }))
    expect(Buffer.from((await run(rt.readFile("dl1", "/workspace/f", 0, 100))).data).toString()).toBe("files work")
    await run(rt.destroy("dl1"))
  }, 60_000)
})

describe("pulls", () => {
  it("of one new image by concurrent creates download each layer once", async () => {
    const pushed = registry.push("test/concurrent", "1", { layers: [alpineLike("Concurrent"), [{ name: "extra", data: "x" }]] })
    await Promise.all(["cc1", "cc2", "cc3"].map((id) => run(rt.create(spec(id, `${registry.host}/test/concurrent:1`)))))
    for (const layer of pushed.layers) expect(registry.blobGets.get(layer)).toBe(1)
    for (const id of ["cc1", "cc2", "cc3"]) await run(rt.destroy(id))
  }, 60_000)

  it("fail clearly, and no sandbox runs: unknown image, unknown tag, wrong platform, digest mismatch, unreachable registry", async () => {
    expect(await pullFailure("bad1", `${registry.host}/test/nothing:1`)).toMatch(/has no image test\/nothing/)
    expect(await pullFailure("bad2", `${registry.host}/test/alpine:9.99`)).toMatch(/no such tag 9\.99/)
    registry.push("test/armonly", "1", { index: true, architecture: "arm64", layers: [[{ name: "f", data: "x" }]] })
    expect(await pullFailure("bad3", `${registry.host}/test/armonly:1`)).toMatch(/no variant for linux\/amd64/)
    expect(await pullFailure("bad4", `${registry.host}/test/alpine:3.20`, { platform: "linux/s390x" })).toMatch(/wrong platform/)
    registry.push("test/corrupt", "1", { corruptLayer: true, layers: [[{ name: "f", data: "honest" }]] })
    expect(await pullFailure("bad5", `${registry.host}/test/corrupt:1`)).toMatch(/does not match its digest/)
    expect(await pullFailure("bad6", "127.0.0.1:1/test/alpine:1")).toMatch(/cannot be reached/)
    expect(await pullFailure("bad7", "registry.example.invalid:notaport/x")).toMatch(/is not an image reference: bad registry host/)
  }, 60_000)

  it("fail clearly on documents of the wrong shape (each decoded before use): invalid_image, never an internal error", async () => {
    const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
    const json = (value: unknown) => Buffer.from(JSON.stringify(value))
    const layer = registry.putBlob("test/malformed", Buffer.from(Bun.gzipSync(new Uint8Array(1024))))
    const manifestWith = (config: { digest: string; size: number }, layers: unknown = [{ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", ...layer }]) =>
      json({ schemaVersion: 2, mediaType: OCI_MANIFEST, config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config }, layers })
    const goodConfig = registry.putBlob("test/malformed", json({ architecture: "amd64", os: "linux", config: {} }))
    const cases: Array<[string, Buffer, string, RegExp]> = [
      ["null", json(null), OCI_MANIFEST, /manifest is not a JSON object/],
      ["index", json({ schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: [null] }), "application/vnd.oci.image.index.v1+json", /image index is malformed/],
      ["platform", json({ schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: [{ platform: { os: 5 } }] }), "application/vnd.oci.image.index.v1+json", /image index is malformed/],
      ["layers", manifestWith(goodConfig, ["sha256:abc"]), OCI_MANIFEST, /layer descriptor is malformed/],
      ["env", manifestWith(registry.putBlob("test/malformed", json({ architecture: "amd64", os: "linux", config: { Env: 5 } }))), OCI_MANIFEST, /image config is malformed/],
      ["config", manifestWith(registry.putBlob("test/malformed", json(["not", "a", "config"]))), OCI_MANIFEST, /image config is malformed/]
    ]
    for (const [tag, body, type, message] of cases) {
      registry.putManifest("test/malformed", tag, body, type)
      expect(await pullFailure(`malformed-${tag}`, `${registry.host}/test/malformed:${tag}`)).toMatch(message)
    }
  }, 60_000)

  it("of an image larger than IMAGE_MAX_MB fail as too large", async () => {
    const big = Buffer.from(crypto.getRandomValues(new Uint8Array(1024 * 1024)))
    registry.push("test/big", "1", { layers: Array.from({ length: 70 }, (_, i) => [{ name: `f${i}`, data: big }]) })
    expect(await pullFailure("big1", `${registry.host}/test/big:1`)).toMatch(/more than the 64 MiB allowed/)
  }, 60_000)
})

describe("the layer cache", () => {
  it("is swept down to IMAGE_CACHE_MB, least recently used first, never a layer an existing sandbox runs on", async () => {
    // Room for two busybox layers (a and b), not three.
    const small = newRuntime("oci-lru", { imageCacheMb: Math.round((2.5 * busybox().length) / 1048576), registryAllowPrivate: true })
    try {
      const a = registry.push("lru/a", "1", { layers: [alpineLike("A")] })
      const b = registry.push("lru/b", "1", { layers: [alpineLike("B"), [{ name: "b", data: "b" }]] })
      const c = registry.push("lru/c", "1", { layers: [alpineLike("C")] })
      const create = (id: string, image: string) => run(small.rt.create({ id, vcpu: 1, memoryMb: 128, diskMb: 64, internet: false, image: { reference: `${registry.host}/${image}` } }))
      await create("lru-a", "lru/a:1")
      await create("lru-b", "lru/b:1")
      await run(small.rt.destroy("lru-b"))
      // a (in use) and b fit; c would push the cache over its size: b, unused, goes first.
      await create("lru-c", "lru/c:1")
      const cached = (digest: string) => fs.existsSync(layerDir(small.dataDir, digest))
      expect(cached(a.layers[0]!)).toBe(true)
      expect(cached(c.layers[0]!)).toBe(true)
      expect(cached(b.layers[0]!)).toBe(false)
      expect((await sh(small.rt, "lru-a", "cat /etc/os-release")).stdout).toContain('NAME="A"')
    } finally {
      await small.cleanup()
    }
  }, 60_000)
})

describe("private registries", () => {
  it("need the credentials of REGISTRY_AUTH_FILE", async () => {
    const privateRegistry = startRegistry({ credentials: { username: "robot", password: "s3cret" } })
    const authDir = tempDataDir("oci-auth")
    const authFile = path.join(authDir, "auth.json")
    fs.writeFileSync(authFile, JSON.stringify({ auths: { [privateRegistry.host]: { auth: btoa("robot:s3cret") } } }))
    const withAuth = newRuntime("oci-auth", { registryAuthFile: authFile, registryAllowPrivate: true })
    try {
      privateRegistry.push("team/app", "1", { layers: [alpineLike("Private")] })
      const reference = `${privateRegistry.host}/team/app:1`
      const e = (await failure(rt.create(spec("priv1", reference)))) as RuntimeError
      expect(e.kind).toBe("image_pull_failed")
      expect(e.message).toMatch(/does not exist or needs credentials \(REGISTRY_AUTH_FILE\)/)
      await run(withAuth.rt.create({ id: "priv2", vcpu: 1, memoryMb: 128, diskMb: 64, internet: false, image: { reference } }))
      expect((await sh(withAuth.rt, "priv2", "cat /etc/os-release")).stdout).toContain('NAME="Private"')
    } finally {
      await withAuth.cleanup()
      privateRegistry.stop()
      fs.rmSync(authDir, { recursive: true, force: true })
    }
  }, 60_000)
})
