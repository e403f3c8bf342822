/**
 * The SDK calls the Modal adapter makes, against a recording double of `ModalClient` (the structural `SdkClient`
 * the real client satisfies): exact create parameters (cpu = vCPU / 2, memoryMiB, timeoutMs, tags, blockNetwork,
 * the registry image), AlreadyExists answered by a lookup by name, readiness by exec, reconcile by name and tag,
 * exec with interleaved output and stdin, files through the SDK filesystem, destroy after the usage read, the
 * error-kind table, and the cost arithmetic with a worked example.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { conformanceInput } from "../testing/conformance.ts"
import { cpuFor, DEFAULT_IMAGE, makeModalProvider, PYTHON_IMAGE, RATE_CARD, sandboxName, TAG_SANDBOX_ID, usageCostMicrousd } from "./adapter/index.ts"
import { type SdkClient, sdkApi, type SdkProcess, type SdkSandbox, translateSdkError } from "./adapter/sdk.ts"

type Call = readonly [string, ...Array<unknown>]

const stream = (chunks: ReadonlyArray<string>) =>
  new ReadableStream<Uint8Array>({
    start: (controller) => {
      for (const c of chunks) controller.enqueue(new TextEncoder().encode(c))
      controller.close()
    }
  })

class NotFoundError extends Error {}
class AlreadyExistsError extends Error {}
class SandboxFilesystemNotFoundError extends Error {}

/** A double that records every SDK call and answers like Modal would. */
const double = (options: { readonly existing?: boolean; readonly output?: { readonly stdout: ReadonlyArray<string>; readonly stderr: ReadonlyArray<string>; readonly code: number } } = {}) => {
  const calls: Array<Call> = []
  const files = new Map<string, Uint8Array>()
  let terminated = false
  const sandbox = (sandboxId: string, tags: Record<string, string>): SdkSandbox => ({
    sandboxId,
    exec: async (command, params) => {
      calls.push(["sandbox.exec", sandboxId, command, params])
      const out = command[0] === "mkdir" ? { stdout: [], stderr: [], code: 0 } : options.output ?? { stdout: [], stderr: [], code: 0 }
      const process: SdkProcess = {
        stdin: { writeBytes: async (bytes) => void calls.push(["stdin.writeBytes", new TextDecoder().decode(bytes)]) },
        stdout: stream(out.stdout),
        stderr: stream(out.stderr),
        closeStdin: async () => void calls.push(["process.closeStdin"]),
        wait: async () => out.code
      }
      return process
    },
    poll: async () => (calls.push(["sandbox.poll", sandboxId]), terminated ? 137 : null),
    terminate: async () => {
      calls.push(["sandbox.terminate", sandboxId])
      terminated = true
    },
    getTags: async () => (calls.push(["sandbox.getTags", sandboxId]), tags),
    filesystem: {
      readBytes: async (path) => {
        calls.push(["filesystem.readBytes", path])
        const data = files.get(path)
        if (data === undefined) throw new SandboxFilesystemNotFoundError(`No such file: ${path}`)
        return data
      },
      writeBytes: async (data, path) => void (calls.push(["filesystem.writeBytes", path, data.length]), files.set(path, data)),
      stat: async (path) => {
        calls.push(["filesystem.stat", path])
        if (path === "/workspace") return { path, type: "directory", size: 0, modifiedTime: 0 }
        const data = files.get(path)
        if (data === undefined) throw new SandboxFilesystemNotFoundError(`No such file: ${path}`)
        return { path, type: "file", size: data.length, modifiedTime: 1_700_000_000 }
      },
      listFiles: async (path) => (calls.push(["filesystem.listFiles", path]), []),
      remove: async (path, opts) => void calls.push(["filesystem.remove", path, opts])
    }
  })
  const tagsOf = (id: string) => ({ [TAG_SANDBOX_ID]: id })
  const client: SdkClient = {
    apps: { fromName: async (name, params) => (calls.push(["apps.fromName", name, params]), { appId: "ap-1" }) },
    images: { fromRegistry: (tag) => (calls.push(["images.fromRegistry", tag]), { tag }) },
    sandboxes: {
      create: async (_app, _image, params) => {
        calls.push(["sandboxes.create", params])
        if (options.existing === true) throw new AlreadyExistsError(`Sandbox ${params.name} already exists`)
        return sandbox("sb-1", params.tags)
      },
      fromName: async (appName, name, params) => {
        calls.push(["sandboxes.fromName", appName, name, params])
        if (options.existing !== true) throw new NotFoundError(`Sandbox with name '${name}' not found`)
        return sandbox("sb-1", tagsOf("sbx_remote1"))
      },
      fromId: async (id) => (calls.push(["sandboxes.fromId", id]), sandbox(id, tagsOf("sbx_remote1")))
    },
    cpClient: {
      sandboxGetResourceUsage: async (request) => (calls.push(["cpClient.sandboxGetResourceUsage", request]), { cpuCoreNanosecs: 1800e9, memGibNanosecs: 7200e9, gpuNanosecs: 0 })
    }
  }
  const provider = makeModalProvider({ api: sdkApi(async () => client, "dev"), appName: "metal-sandboxes", mode: "remote", readyPollMs: 1, eventsWaitMs: 10 })
  return { calls, provider, files }
}

const run = <A, E>(e: Effect.Effect<A, E>) => Effect.runPromise(e)

describe("modal (remote): the SDK calls", () => {
  it("create: app lookup, registry image, cpu = vCPU/2, memory, timeout, tags, blockNetwork; readiness by exec", async () => {
    const { calls, provider } = double()
    const input = { ...conformanceInput("sbx_remote1"), resources: { vcpu: 3, memoryMb: 3072, architecture: "arm64" as const } }
    const sandbox = await run(provider.create(input))
    expect(calls.slice(0, 4)).toEqual([
      ["apps.fromName", "metal-sandboxes", { environment: "dev", createIfMissing: true }],
      ["images.fromRegistry", DEFAULT_IMAGE],
      ["sandboxes.create", {
        name: "metal-sbx_remote1",
        cpu: 1.5,
        memoryMiB: 3072,
        timeoutMs: (600 + 300) * 1000,
        env: { CONFORMANCE_SANDBOX: "yes" },
        tags: { [TAG_SANDBOX_ID]: "sbx_remote1", "metal.organization_id": input.organizationId, "metal.project_id": "prj_conformance" },
        blockNetwork: true
      }],
      ["sandbox.exec", "sb-1", ["mkdir", "-p", "/workspace"], { mode: "binary" }]
    ])
    expect(sandbox).toMatchObject({ resourceId: "sb-1", resolvedResources: { vcpu: 3, memoryMb: 3072, architecture: "arm64" } })
    expect(cpuFor(1)).toBe(0.5)
    expect(sandboxName("x".repeat(80)).length).toBeLessThanOrEqual(64)
  })

  it("python environments use python:3.13-slim, OCI sources their image and command", async () => {
    const { calls, provider } = double()
    await run(provider.create({ ...conformanceInput("sbx_remote1"), source: { kind: "environment", environment: "metal/python", version: "latest" } }))
    expect(calls).toContainEqual(["images.fromRegistry", PYTHON_IMAGE])
    const second = double()
    await run(second.provider.create({ ...conformanceInput("sbx_remote1"), source: { kind: "oci_image", image: "alpine:3.20", command: ["sleep", "infinity"] } }))
    expect(second.calls).toContainEqual(["images.fromRegistry", "alpine:3.20"])
    expect(second.calls.find((c) => c[0] === "sandboxes.create")?.[1]).toMatchObject({ command: ["sleep", "infinity"] })
  })

  it("AlreadyExists is answered by the sandbox of that name when it carries our tag; reconcile by name", async () => {
    const { calls, provider } = double({ existing: true })
    const sandbox = await run(provider.create(conformanceInput("sbx_remote1")))
    expect(sandbox.resourceId).toBe("sb-1")
    expect(calls).toContainEqual(["sandboxes.fromName", "metal-sandboxes", "metal-sbx_remote1", { environment: "dev" }])
    expect((await run(provider.reconcileCreate("sbx_remote1")))?.resourceId).toBe("sb-1")
    // Someone else's sandbox under that name is not ours.
    expect(await run(provider.reconcileCreate("sbx_other"))).toBeNull()
    expect(await run(double().provider.reconcileCreate("sbx_remote1"))).toBeNull()
  })

  it("exec: binary mode, workdir and env, interleaved stdout/stderr numbered in order, stdin written then closed", async () => {
    const { calls, provider } = double({ output: { stdout: ["a", "c"], stderr: ["b"], code: 3 } })
    const sandbox = await run(provider.create(conformanceInput("sbx_remote1")))
    const { executionId } = await run(provider.exec(sandbox, { command: ["cat"], environment: { A: "1" }, timeoutSeconds: 60, maxOutputBytes: 1024, processId: "p1", stdin: true }))
    expect(calls).toContainEqual(["sandbox.exec", "sb-1", ["cat"], { mode: "binary", workdir: "/workspace", env: { A: "1" }, timeoutMs: 60_000 }])
    await run(provider.sendInput!(sandbox, executionId, new TextEncoder().encode("in"), true))
    expect(calls.slice(-2)).toEqual([["stdin.writeBytes", "in"], ["process.closeStdin"]])
    let events: ReadonlyArray<{ readonly type: string; readonly seq: number }> = []
    for (let i = 0; i < 50 && events.at(-1)?.type !== "exit"; i++) events = await run(provider.execEvents(sandbox, executionId, 0))
    expect(events.map((e) => e.seq)).toEqual([0, 1, 2, 3])
    expect(events.filter((e) => e.type !== "exit").map((e) => e.type).sort()).toEqual(["stderr", "stdout", "stdout"])
    expect(events.at(-1)).toMatchObject({ type: "exit", exitCode: 3, cancelled: false })
    expect((await Effect.runPromise(Effect.flip(provider.cancelExec(sandbox, executionId)))).kind).toBe("unsupported")
  })

  it("files: stat before a create-mode write and a read, the SDK's whole-file read and write, delete", async () => {
    const { calls, provider } = double()
    const sandbox = await run(provider.create(conformanceInput("sbx_remote1")))
    const data = new TextEncoder().encode("hello")
    expect(await run(provider.writeFile(sandbox, { path: "/workspace/a.txt", data, mode: "create", createParents: false }))).toEqual({ bytesWritten: 5, created: true })
    expect(calls.slice(-3)).toEqual([["filesystem.stat", "/workspace/a.txt"], ["filesystem.stat", "/workspace"], ["filesystem.writeBytes", "/workspace/a.txt", 5]])
    expect((await Effect.runPromise(Effect.flip(provider.writeFile(sandbox, { path: "/workspace/a.txt", data, mode: "create", createParents: false })))).kind).toBe("customer")
    const read = await run(provider.readFile(sandbox, { path: "/workspace/a.txt", offsetBytes: 1, maxBytes: 3 }))
    expect(new TextDecoder().decode(read.data)).toBe("ell")
    expect(read).toMatchObject({ offsetBytes: 1, sizeBytes: 5, eof: false })
    expect((await Effect.runPromise(Effect.flip(provider.readFile(sandbox, { path: "/workspace/none", offsetBytes: 0, maxBytes: 3 })))).kind).toBe("not_found")
    expect(await run(provider.deleteFile(sandbox, { path: "/workspace/a.txt", recursive: true }))).toEqual({ deleted: true })
    expect(calls.at(-1)).toEqual(["filesystem.remove", "/workspace/a.txt", { recursive: true }])
  })

  it("destroy reads the usage, then terminates; the cost is that usage at the rate card", async () => {
    const { calls, provider } = double()
    const sandbox = await run(provider.create(conformanceInput("sbx_remote1")))
    await run(provider.destroy(sandbox))
    expect(calls.slice(-2)).toEqual([["cpClient.sandboxGetResourceUsage", { sandboxId: "sb-1" }], ["sandbox.terminate", "sb-1"]])
    // Worked example: 1,800 core-seconds (0.5 core-hour) and 7,200 GiB-seconds (2 GiB-hours):
    // 0.5 × 141,912 + 2 × 24,012 = 70,956 + 48,024 = 118,980 µUSD.
    const cost = await run(provider.getCost(sandbox, { from: "2026-01-01T00:00:00Z", to: "2026-01-01T01:00:00Z" }))
    expect(cost).toEqual({ amountMicrousd: 118_980n, measuredThrough: "2026-01-01T01:00:00Z", provenance: "provider_metered", confidence: "high", rateCardVersion: RATE_CARD.version })
    expect(usageCostMicrousd({ cpuCoreNanosecs: 60e9, memGibNanosecs: 60e9 })).toBeCloseTo(2365.2 + 400.2, 6)
  })

  it("error kinds: the SDK's error classes and gRPC statuses", () => {
    class InvalidError extends Error {}
    class ResourceExhaustedError extends Error {}
    class SandboxFilesystemIsADirectoryError extends Error {}
    const grpc = (code: number) => Object.assign(new Error(`status ${code}`), { code })
    const table: ReadonlyArray<readonly [unknown, string]> = [
      [new NotFoundError("x"), "not_found"],
      [new AlreadyExistsError("x"), "already_exists"],
      [new InvalidError("x"), "invalid"],
      [new ResourceExhaustedError("x"), "resource_exhausted"],
      [new SandboxFilesystemIsADirectoryError("x"), "is_directory"],
      [grpc(16), "auth"],
      [grpc(7), "auth"],
      [grpc(14), "unavailable"],
      [grpc(8), "resource_exhausted"],
      [new Error("Profile is missing credentials. Please set them in .modal.toml"), "auth"],
      [new Error("something else"), "internal"]
    ]
    for (const [error, code] of table) expect(translateSdkError(error).code, String(error)).toBe(code)
  })
})
