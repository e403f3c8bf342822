/**
 * Failures inside a sandbox reach the API in the user's terms (issue 7, item 12): a real sandbox at each emulated
 * provider (Daytona, E2B) is asked for impossible file operations and a command in a missing directory; each
 * answer names what failed (and the path asked for), carries a stable `details.reason`, and shows nothing of the
 * provider, its emulator or the host: no status lines, no errno names, no DATA_DIR path, no JavaScript.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, waitProcess, waitRuntimeOperation } from "../support/sandbox.ts"
import { api, bootstrap, type RunningServer, startServer } from "../support/server.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => {
  server = await startServer()
  http = api(server.url)
  const boot = await bootstrap(server.dataDir, "messages@example.com")
  auth = { token: boot.api_key, project: boot.project_id }
})
afterAll(() => server.stop())

/** Words that belong to a provider's wire, an errno, a stack or the host, never to an API message. */
const internals = () =>
  new RegExp(["answered", "ENAMETOOLONG", "ENOENT", "EACCES", "EISDIR", "ENOTDIR", "EEXIST", "lstat", "toolbox", "filesystem\\.Filesystem", "undefined is not", "evaluating", "\\.ts:\\d", escape(server.dataDir)].join("|"))
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

const LONG = `/workspace/${"a".repeat(300)}`

describe.each(["daytona", "e2b"])("%s: file and process failures", (provider) => {
  let sandboxId: string

  beforeAll(async () => {
    sandboxId = (await createReadySandbox(http, auth, minimalSandbox({ provider }))).id
    const seed = await http.post(`/v1/sandboxes/${sandboxId}/filesystem/write`, {
      ...auth,
      body: { path: "/workspace/present.txt", data_base64: Buffer.from("hi").toString("base64") },
      headers: { "idempotency-key": idempotencyKey("seed") }
    })
    expect((await waitRuntimeOperation(http, auth, sandboxId, seed.body.id)).state).toBe("succeeded")
  })

  const failedOperation = async (operation: string, body: Record<string, unknown>) => {
    const started = await http.post(`/v1/sandboxes/${sandboxId}/filesystem/${operation}`, { ...auth, body, headers: { "idempotency-key": idempotencyKey(operation) } })
    expect(started.status).toBe(202)
    const done = await waitRuntimeOperation(http, auth, sandboxId, started.body.id)
    expect(done.state).toBe("failed")
    expect(done.error.message).not.toMatch(internals())
    expect(done.error.details?.provider).toBe(provider)
    return done.error as { code: string; message: string; retryable: boolean; details: { reason: string } }
  }

  it.each([
    ["read", { path: LONG }, "invalid_path", "name_too_long", `The file name is too long: /workspace/${"a".repeat(189)}…`],
    ["write", { path: LONG, data_base64: "aGk=" }, "invalid_path", "name_too_long", "The file name is too long: /workspace/aaa"],
    ["list", { path: LONG }, "invalid_path", "name_too_long", "The file name is too long: /workspace/aaa"],
    ["read", { path: "/workspace/nope" }, "file_not_found", "not_found", "No such file or directory: /workspace/nope"],
    ["list", { path: "/workspace/nope" }, "file_not_found", "not_found", "No such file or directory: /workspace/nope"],
    ["read", { path: "/workspace" }, "invalid_path", "is_a_directory", "/workspace is a directory"],
    ["list", { path: "/workspace/present.txt" }, "invalid_path", "not_a_directory", "A part of the path is not a directory: /workspace/present.txt"],
    ["write", { path: "/workspace/present.txt", data_base64: "aGk=", mode: "create" }, "invalid_path", "already_exists", "/workspace/present.txt already exists"],
    ["write", { path: "/etc/passwd", data_base64: "aGk=" }, "invalid_path", "permission_denied", "Permission denied: /etc/passwd"],
    ["delete", { path: "/", recursive: true }, "invalid_path", "invalid_path", "The path cannot be used for this operation: /"]
  ] as const)("%s %j fails as %s (%s)", async (operation, body, code, reason, message) => {
    const error = await failedOperation(operation, body)
    expect(error).toMatchObject({ code, retryable: false, details: { reason } })
    expect(error.message.startsWith(message), error.message).toBe(true)
  })

  it("a command in a directory that does not exist says so", async () => {
    const started = await http.post(`/v1/sandboxes/${sandboxId}/processes`, {
      ...auth,
      body: { command: ["true"], cwd: "/nonexistent" },
      headers: { "idempotency-key": idempotencyKey("cwd") }
    })
    const process = await waitProcess(http, auth, sandboxId, started.body.id)
    expect(process.state).toBe("failed")
    expect(process.error.message).not.toMatch(internals())
    // E2B's envd refuses to start it; Daytona's adapter asks its file API first: the same code either way.
    expect(process.error).toMatchObject({ code: "cwd_not_found", message: "The working directory does not exist: /nonexistent", details: { reason: "cwd_not_found" } })
  })
})

describe("the same situation, the same code, on every provider that runs commands", () => {
  it.each(["blaxel", "cloudflare", "daytona", "e2b", "freestyle", "modal", "prime", "runloop", "vercel"])("%s: cwd_not_found, file_not_found, process_exit_nonzero, a full disk", async (provider) => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({ provider }))
    const run = async (body: Record<string, unknown>) => {
      const started = await http.post(`/v1/sandboxes/${sandbox.id}/processes`, { ...auth, body, headers: { "idempotency-key": idempotencyKey("p") } })
      expect(started.status).toBe(202)
      return waitProcess(http, auth, sandbox.id, started.body.id)
    }
    expect((await run({ command: ["true"], cwd: "/nowhere" })).error).toMatchObject({
      code: "cwd_not_found",
      message: "The working directory does not exist: /nowhere",
      retryable: false,
      details: { reason: "cwd_not_found", provider }
    })
    expect((await run({ command: ["sh", "-c", "exit 3"] })).error).toMatchObject({ code: "process_exit_nonzero", details: { exit_code: 3 } })
    const read = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/read`, { ...auth, body: { path: "/workspace/absent.txt" }, headers: { "idempotency-key": idempotencyKey("r") } })
    expect((await waitRuntimeOperation(http, auth, sandbox.id, read.body.id)).error).toMatchObject({
      code: "file_not_found",
      message: "No such file or directory: /workspace/absent.txt",
      details: { reason: "not_found", provider }
    })
    // A full disk (allocated at once, without writing: the sandbox's own disk), then a write through the API.
    await run({ command: ["sh", "-c", "fallocate -l $(df --output=avail -B1 /workspace | tail -1) /workspace/fill"] })
    const write = await http.post(`/v1/sandboxes/${sandbox.id}/filesystem/write`, {
      ...auth,
      body: { path: "/workspace/after-full.bin", data_base64: Buffer.alloc(1024 * 1024, 7).toString("base64"), mode: "overwrite" },
      headers: { "idempotency-key": idempotencyKey("w") }
    })
    expect((await waitRuntimeOperation(http, auth, sandbox.id, write.body.id)).error).toMatchObject({
      code: "runtime_operation_failed",
      message: "The sandbox's disk is full",
      details: { reason: "no_space", provider }
    })
    const deleted = await http.delete(`/v1/sandboxes/${sandbox.id}`, auth)
    expect(deleted.status).toBe(202)
  }, 60_000)
})
