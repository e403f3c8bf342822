/**
 * `oci_image` sources on emulated providers run the image for real (issue 14, item 1): each emulator whose provider
 * takes images (Daytona, Blaxel, Vercel) passes it to the local runtime, which pulls it from the registry (here one
 * on loopback, made by the test from a static busybox) and runs the sandbox on it (Northflank's too, though it
 * offers no processes to look inside with), as built: its Cmd started at create, every process as its User, in
 * its WorkingDir unless the request names a cwd (Blaxel, Vercel; Daytona's adapter is its own: a process without a cwd
 * starts in the image's WorkingDir). A pull that fails fails the create operation with `image_pull_failed` saying
 * which image and why — never a ready sandbox on another image.
 * The registry is on loopback, so this gateway runs with REGISTRY_ALLOW_PRIVATE=true; one without it refuses it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { alpineLike, startRegistry, type TestRegistry } from "../support/registry.ts"
import { api, bootstrap, type RunningServer, startServer } from "../support/server.ts"
import { idempotencyKey, type KeyAuth, minimalSandbox, runProcess, waitOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth
let registry: TestRegistry

beforeAll(async () => {
  registry = startRegistry()
  registry.push("test/alpine", "3.20", {
    index: true,
    env: ["PATH=/usr/local/bin:/usr/bin:/bin", "IMAGE_GREETING=from-the-image"],
    workingDir: "/srv",
    layers: [[...alpineLike(), { name: "srv/", type: "dir" }]]
  })
  // An image as a Dockerfile builds one: a user of its own, a WORKDIR, a CMD that runs at start.
  registry.push("test/asbuilt", "1", {
    user: "app",
    workingDir: "/srv",
    cmd: ["sh", "-c", 'echo "$(id -u):$(id -g) $HOME $(pwd)" > /srv/ran'],
    layers: [[
      ...alpineLike("AsBuilt"),
      { name: "etc/passwd", data: "root:x:0:0:root:/root:/bin/sh\napp:x:1001:1002:App:/home/app:/bin/sh\n" },
      { name: "home/app/", type: "dir" },
      { name: "srv/", type: "dir" }
    ]]
  })
  // The test registry is on loopback, which registry requests may reach only when the operator allows it.
  server = await startServer({ env: { REGISTRY_ALLOW_PRIVATE: "true" } })
  http = api(server.url)
  const owner = await bootstrap(server.dataDir, "oci@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
}, 60_000)
afterAll(async () => {
  await server.stop()
  registry.stop()
})

const create = async (image: string, provider: string | undefined) => {
  const body = minimalSandbox({
    source: { kind: "oci_image", image },
    network: { internet_access: true },
    ...(provider === undefined ? {} : { provider })
  })
  const created = await http.post("/v1/sandboxes", { ...auth, body, headers: { "idempotency-key": idempotencyKey("oci") } })
  expect(created.status).toBe(202)
  return { created, op: await waitOperation(http, auth, created.body.operation.id, 60_000) }
}

describe("oci_image sources on emulated providers", () => {
  // Emulators that cannot hand an image to the runtime do not take such a source (the real provider may).
  for (const provider of ["prime", "freestyle"]) {
    it(`${provider}: its emulator takes no oci_image source: no_eligible_provider naming the source`, async () => {
      const { created, op } = await create(`${registry.host}/test/alpine:3.20`, provider)
      expect(op.state).toBe("failed")
      expect(op.error.code).toBe("no_eligible_provider")
      expect(JSON.stringify(op.error.details.attempts)).toMatch(/oci_image/)
      expect((await http.get(`/v1/sandboxes/${created.body.sandbox.id}`, auth)).body.state).toBe("failed")
    }, 30_000)
  }

  for (const provider of [undefined, "daytona", "blaxel", "vercel"]) {
    it(`${provider ?? "auto"}: the sandbox runs on the image (its os-release, its Env), not on the host's system`, async () => {
      const { created, op } = await create(`${registry.host}/test/alpine:3.20`, provider)
      expect(op.state, JSON.stringify(op.error)).toBe("succeeded")
      // The pull shows in the operation's events: resolved, each layer (fetched, or found cached once pulled), done.
      const events = (await http.get(`/v1/operations/${created.body.operation.id}/events`, auth)).text
      const pulls = [...events.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!)).filter((f) => f.type === "image_pull").map((f) => f.data)
      expect(pulls.map((p) => p.phase)).toEqual(["resolved", "layer", "done"])
      expect(pulls[0]).toMatchObject({ image: `${registry.host}/test/alpine:3.20`, layers: 1 })
      expect(typeof pulls[1].cached).toBe("boolean")
      const id = created.body.sandbox.id
      const r = await runProcess(http, auth, id, ["sh", "-c", "cat /etc/os-release; echo $IMAGE_GREETING; ls /usr/bin 2>&1 | head -1"])
      expect(r.stdout).toContain('NAME="TestAlpine"')
      expect(r.stdout).toContain("from-the-image")
      expect(r.stdout).toMatch(/No such file/)
      expect((await http.delete(`/v1/sandboxes/${id}`, { ...auth, headers: { "idempotency-key": idempotencyKey("del") } })).status).toBeLessThan(300)
    }, 90_000)
  }

  it("daytona: a process without a cwd starts in the image's WorkingDir (a plain one and a terminal), one with a cwd there", async () => {
    const { created, op } = await create(`${registry.host}/test/alpine:3.20`, "daytona")
    expect(op.state, JSON.stringify(op.error)).toBe("succeeded")
    const id = created.body.sandbox.id
    expect((await runProcess(http, auth, id, ["pwd"])).stdout).toBe("/srv\n")
    expect((await runProcess(http, auth, id, ["pwd"], { cwd: "/workspace" })).stdout).toBe("/workspace\n")
    const terminal = await runProcess(http, auth, id, ["pwd"], { pty: { cols: 80, rows: 24 } })
    expect(terminal.process.exit_code).toBe(0)
    expect(terminal.stdout).toBe("/srv\r\n")
    expect((await http.delete(`/v1/sandboxes/${id}`, { ...auth, headers: { "idempotency-key": idempotencyKey("del") } })).status).toBeLessThan(300)
  }, 90_000)

  for (const provider of ["blaxel", "vercel"]) {
    it(`${provider}: the image runs as built: its Cmd at start, every process as its User with its home, in its WorkingDir unless told otherwise`, async () => {
      const { created, op } = await create(`${registry.host}/test/asbuilt:1`, provider)
      expect(op.state, JSON.stringify(op.error)).toBe("succeeded")
      const id = created.body.sandbox.id
      // The Cmd was started at create; it may still be running.
      const ran = await runProcess(http, auth, id, ["sh", "-c", "until test -s /srv/ran; do sleep 0.1; done; cat /srv/ran"])
      expect(ran.stdout).toBe("1001:1002 /home/app /srv\n")
      const r = await runProcess(http, auth, id, ["sh", "-c", 'pwd; id -u; echo "$HOME"'])
      expect(r.stdout).toBe("/srv\n1001\n/home/app\n")
      expect((await runProcess(http, auth, id, ["pwd"], { cwd: "/tmp" })).stdout).toBe("/tmp\n")
      expect((await http.delete(`/v1/sandboxes/${id}`, { ...auth, headers: { "idempotency-key": idempotencyKey("del") } })).status).toBeLessThan(300)
    }, 90_000)
  }

  it("northflank: a service on the image becomes ready (lifecycle only: nothing runs in it but the image)", async () => {
    const { created, op } = await create(`${registry.host}/test/alpine:3.20`, "northflank")
    expect(op.state, JSON.stringify(op.error)).toBe("succeeded")
    const id = created.body.sandbox.id
    expect((await http.get(`/v1/sandboxes/${id}`, auth)).body).toMatchObject({ provider: "northflank", state: "ready" })
    expect((await http.delete(`/v1/sandboxes/${id}`, { ...auth, headers: { "idempotency-key": idempotencyKey("del") } })).status).toBeLessThan(300)
  }, 60_000)

  for (const [label, image, reason] of [
    ["an unknown tag", () => `${registry.host}/test/alpine:9.99`, /no such tag 9\.99/],
    ["an unknown image", () => `${registry.host}/test/nothing:1`, /has no image test\/nothing/],
    ["an unreachable registry", () => "127.0.0.1:1/test/alpine:1", /cannot be reached/]
  ] as const) {
    for (const provider of ["daytona", "blaxel", "vercel", "northflank"]) {
      it(`${provider}: ${label} fails the create with image_pull_failed saying so; no sandbox runs`, async () => {
        const { created, op } = await create(image(), provider)
        expect(op.state).toBe("failed")
        expect(op.error.code).toBe("image_pull_failed")
        expect(op.error.message).toMatch(reason)
        expect(op.error.message).toMatch(/^The image could not be pulled: /)
        const attempts = op.error.details.attempts as Array<{ provider: string; outcome: string; code: string; message: string }>
        expect(attempts.at(-1)).toMatchObject({ provider, outcome: "failed", code: "image_pull_failed" })
        expect(attempts.at(-1)?.message).toMatch(reason)
        expect((await http.get(`/v1/sandboxes/${created.body.sandbox.id}`, auth)).body.state).toBe("failed")
      }, 60_000)
    }
  }
})

describe("a gateway with the default registry policy", () => {
  it("refuses a registry on loopback (a tenant's image reference cannot reach the host's ports)", async () => {
    const strict = await startServer()
    try {
      const strictHttp = api(strict.url)
      const owner = await bootstrap(strict.dataDir, "oci-strict@example.com")
      const strictAuth = { token: owner.api_key, project: owner.project_id }
      const body = minimalSandbox({ source: { kind: "oci_image", image: `${registry.host}/test/alpine:3.20` }, provider: "daytona" })
      const created = await strictHttp.post("/v1/sandboxes", { ...strictAuth, body, headers: { "idempotency-key": idempotencyKey("oci") } })
      expect(created.status).toBe(202)
      const op = await waitOperation(strictHttp, strictAuth, created.body.operation.id, 60_000)
      expect(op.state).toBe("failed")
      expect(op.error.code).toBe("image_pull_failed")
      expect(op.error.message).toMatch(/loopback address .*REGISTRY_ALLOW_PRIVATE=true/)
    } finally {
      await strict.stop()
    }
  }, 60_000)
})
