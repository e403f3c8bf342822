/**
 * The MCP server (issue 15, item 3; issue 24, item 6) driven by the official MCP TypeScript client over Streamable
 * HTTP against the real gateway, and by the MCP Inspector's CLI: initialize, tools/list, and tools/call for every
 * tool; a project key alone authenticates (its project implied), or with the project in the path; tool errors
 * carry the envelope's code; transport-level mistakes (credentials, method, media type, JSON, batches) are
 * refused clearly.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, type Bootstrap, bootstrap, expectEnvelope, type RunningServer, startServer, tempDataDir } from "../support/server.ts"
import type { KeyAuth } from "../support/sandbox.ts"

let server: RunningServer
let owner: Bootstrap
let auth: KeyAuth
let client: Client

/** A connected client: the key and, when given, X-Metal-Project-ID; at /v1/mcp or another path. */
const connect = async (a: { token: string; project?: string }, route = "/v1/mcp") => {
  const c = new Client({ name: "gateway-test", version: "1.0.0" })
  await c.connect(new StreamableHTTPClientTransport(new URL(`${server.url}${route}`), {
    requestInit: { headers: { authorization: `Bearer ${a.token}`, ...(a.project === undefined ? {} : { "x-metal-project-id": a.project }) } }
  }))
  return c
}

const TOOL_NAMES = [
  "computer_action", "create_sandbox", "destroy_sandbox", "expose_port", "get_sandbox", "list_directory", "list_sandboxes", "pause_sandbox", "read_file", "resume_sandbox",
  "run_command", "screenshot", "write_file"
]

/** A tool's structured result, failing the test when the tool reported an error. */
const call = async (name: string, args: Record<string, unknown>) => {
  const result = await client.callTool({ name, arguments: args })
  if (result.isError === true) throw new Error(`${name} failed: ${JSON.stringify(result.content)}`)
  return result.structuredContent as any
}

beforeAll(async () => {
  server = await startServer()
  owner = await bootstrap(server.dataDir, "mcp@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
  client = await connect(auth)
})
afterAll(async () => {
  await client?.close()
  await server.stop()
})

describe("MCP over Streamable HTTP", () => {
  it("initializes and lists the tools with the API's input schemas", async () => {
    expect(client.getServerVersion()).toMatchObject({ name: "sandbox-gateway" })
    expect(client.getServerCapabilities()?.tools).toBeDefined()
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name).sort()).toEqual(TOOL_NAMES)
    const run = tools.find((t) => t.name === "run_command")!
    expect(run.inputSchema.type).toBe("object")
    expect(run.inputSchema.required).toEqual(expect.arrayContaining(["sandbox_id", "command"]))
    // From the API's StartProcess Schema: its bounds, not a copy of them.
    expect(JSON.stringify((run.inputSchema.properties as any).timeout_seconds)).toMatch(/"minimum":1.*"maximum":3600|"maximum":3600.*"minimum":1/)
    expect(tools.find((t) => t.name === "create_sandbox")!.inputSchema.properties).toHaveProperty("source")
  })

  it("creates a sandbox, runs a command, writes, reads and lists files, exposes a port and destroys it", async () => {
    const sandbox = await call("create_sandbox", {
      source: { kind: "environment", environment: "metal/base" },
      resources: { vcpu: 1, memory_mb: 512 },
      lifecycle: { runtime_timeout_seconds: 600 },
      provider: "daytona",
      features: { computer_use: true }
    })
    expect(sandbox).toMatchObject({ state: "ready", provider: "daytona" })
    const id = sandbox.id as string

    // The desktop: an action, then a screenshot that comes back as image content.
    expect(await call("computer_action", { sandbox_id: id, action: { type: "mouse_move", x: 40, y: 30 } })).toMatchObject({ kind: "computer_action", cursor_position: { x: 40, y: 30 } })
    const shot = await client.callTool({ name: "screenshot", arguments: { sandbox_id: id, show_cursor: true } })
    expect(shot.isError).not.toBe(true)
    const image = (shot.content as Array<any>).find((c) => c.type === "image")
    expect(image.mimeType).toBe("image/png")
    expect(Buffer.from(image.data, "base64").subarray(1, 4).toString("latin1")).toBe("PNG")
    expect(shot.structuredContent).toMatchObject({ kind: "computer_screenshot", format: "png", cursor_position: { x: 40, y: 30 } })
    const badAction = await client.callTool({ name: "computer_action", arguments: { sandbox_id: id, action: { type: "mouse_fly" } } })
    expect((badAction.structuredContent as any).error.code).toBe("validation_error")

    const ran = await call("run_command", { sandbox_id: id, command: ["sh", "-c", "echo out; echo err >&2; exit 3"] })
    expect(ran).toMatchObject({ state: "failed", exit_code: 3, stdout: "out\n", stderr: "err\n", finished: true })

    expect(await call("write_file", { sandbox_id: id, path: "/workspace/notes/hello.txt", text: "héllo\n", create_parents: true })).toMatchObject({ kind: "filesystem_write", bytes_written: 7 })
    expect(await call("read_file", { sandbox_id: id, path: "/workspace/notes/hello.txt" })).toMatchObject({ text: "héllo\n" })
    await call("write_file", { sandbox_id: id, path: "/workspace/bin.dat", data_base64: Buffer.from([0, 255, 1]).toString("base64") })
    const binary = await client.callTool({ name: "read_file", arguments: { sandbox_id: id, path: "/workspace/bin.dat" } })
    expect((binary.structuredContent as any).data_base64).toBe("AP8B")
    const listed = await call("list_directory", { sandbox_id: id, path: "/workspace", recursive: true })
    expect(listed.entries.map((e: any) => e.path)).toEqual(expect.arrayContaining(["/workspace/notes/hello.txt", "/workspace/bin.dat"]))

    // A server on port 8000 inside, exposed; the URL serves it.
    const serve = await client.callTool({ name: "run_command", arguments: { sandbox_id: id, command: ["python3", "-m", "http.server", "8000", "--directory", "/workspace/notes"], wait_seconds: 1 } })
    expect((serve.structuredContent as any).finished).toBe(false)
    const endpoint = await call("expose_port", { sandbox_id: id, port: 8000 })
    expect(endpoint.state).toBe("active")
    let body = ""
    for (let i = 0; i < 100 && body === ""; i++) {
      const res = await fetch(`${endpoint.url}hello.txt`).catch(() => undefined)
      if (res?.status === 200) body = await res.text()
      else await Bun.sleep(100)
    }
    expect(body).toBe("héllo\n")

    expect((await call("destroy_sandbox", { sandbox_id: id })).operation.state).toBe("succeeded")
  }, 120_000)

  it("lists sandboxes with the API's filters, gets one, pauses and resumes it", async () => {
    const request = { source: { kind: "environment", environment: "metal/base" }, resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 600 }, provider: "daytona" }
    const red = await call("create_sandbox", { ...request, metadata: { team: "red", task: "t-1" } })
    const blue = await call("create_sandbox", { ...request, metadata: { team: "blue" } })
    const ids = (page: any) => page.sandboxes.map((s: any) => s.id)
    expect(ids(await call("list_sandboxes", { metadata: { team: "red" } }))).toEqual([red.id])
    expect(ids(await call("list_sandboxes", { metadata: { team: "red", task: "t-2" } }))).toEqual([])
    expect(ids(await call("list_sandboxes", { state: ["ready"], provider: "daytona" }))).toEqual(expect.arrayContaining([red.id, blue.id]))
    const first = await call("list_sandboxes", { limit: 1, state: ["ready"] })
    expect(first.sandboxes).toHaveLength(1)
    expect(ids(await call("list_sandboxes", { limit: 1, state: ["ready"], cursor: first.next_cursor }))).not.toEqual(ids(first))
    expect(await call("get_sandbox", { sandbox_id: red.id })).toMatchObject({ id: red.id, state: "ready", metadata: { team: "red" } })

    expect(await call("pause_sandbox", { sandbox_id: red.id })).toMatchObject({ id: red.id, state: "paused" })
    expect(ids(await call("list_sandboxes", { state: ["paused"] }))).toEqual([red.id])
    expect(await call("resume_sandbox", { sandbox_id: red.id })).toMatchObject({ id: red.id, state: "ready" })
    expect((await call("run_command", { sandbox_id: red.id, command: ["echo", "back"] })).stdout).toBe("back\n")

    // Bad input is the API's answer, as a tool error.
    const badState = await client.callTool({ name: "list_sandboxes", arguments: { state: ["sleeping"] } })
    expect((badState.structuredContent as any).error.code).toBe("validation_error")
    const unknown = await client.callTool({ name: "list_sandboxes", arguments: { colour: "red" } })
    expect((unknown.structuredContent as any).error).toMatchObject({ code: "validation_error", message: "unknown argument: colour" })
    for (const id of [red.id, blue.id]) await call("destroy_sandbox", { sandbox_id: id })
    const stopped = await client.callTool({ name: "pause_sandbox", arguments: { sandbox_id: red.id } })
    expect(stopped.isError).toBe(true)
    expect((stopped.structuredContent as any).error.code).toBe("invalid_sandbox_state")
    expect((await client.callTool({ name: "get_sandbox", arguments: { sandbox_id: "sbx_00000000000000000000000000" } }) as any).structuredContent.error.code).toBe("not_found")
  }, 120_000)

  it("run_command writes `input` to the command's stdin (providers that take input), then closes it", async () => {
    const sandbox = await call("create_sandbox", { source: { kind: "environment", environment: "metal/base" }, resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 600 }, provider: "e2b" })
    const summed = await call("run_command", { sandbox_id: sandbox.id, command: ["python3", "-c", "import sys; print(sum(int(l) for l in sys.stdin))"], input: "1\n2\n39\n" })
    expect(summed).toMatchObject({ state: "succeeded", exit_code: 0, stdout: "42\n" })
    const { tools } = await client.listTools()
    expect(Object.keys(tools.find((t) => t.name === "run_command")!.inputSchema.properties as object)).not.toContain("stdin")
    await call("destroy_sandbox", { sandbox_id: sandbox.id })
  }, 60_000)

  it("tool errors carry the envelope's code and message", async () => {
    const missing = await client.callTool({ name: "run_command", arguments: { sandbox_id: "sbx_00000000000000000000000000", command: ["true"] } })
    expect(missing.isError).toBe(true)
    expect((missing.structuredContent as any).error).toMatchObject({ code: "not_found" })
    const invalid = await client.callTool({ name: "create_sandbox", arguments: { source: { kind: "environment", environment: "metal/base" }, resources: { vcpu: 0, memory_mb: 512 } } })
    expect(invalid.isError).toBe(true)
    expect((invalid.structuredContent as any).error.code).toBe("validation_error")
    const badId = await client.callTool({ name: "read_file", arguments: { sandbox_id: "../../v1/organizations", path: "/workspace/x" } })
    expect((badId.structuredContent as any).error.code).toBe("validation_error")
    const both = await client.callTool({ name: "write_file", arguments: { sandbox_id: "sbx_abc", path: "/workspace/x", text: "a", data_base64: "YQ==" } })
    expect((both.structuredContent as any).error.code).toBe("validation_error")
    await expect(client.callTool({ name: "no_such_tool", arguments: {} })).rejects.toThrow(/Unknown tool/)
  })
})

describe("the project without a header", () => {
  it("a project key alone: its project is implied; a header, when given, must be the key's", async () => {
    const alone = await connect({ token: auth.token })
    try {
      expect((await alone.listTools()).tools.map((t) => t.name).sort()).toEqual(TOOL_NAMES)
      const sandbox = (await alone.callTool({ name: "create_sandbox", arguments: { source: { kind: "environment", environment: "metal/base" }, resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 600 }, provider: "daytona" } })).structuredContent as any
      expect(sandbox).toMatchObject({ state: "ready", project_id: auth.project })
      const ran = (await alone.callTool({ name: "run_command", arguments: { sandbox_id: sandbox.id, command: ["sh", "-c", "echo $((6*7))"] } })).structuredContent
      expect(ran).toMatchObject({ exit_code: 0, stdout: "42\n" })
      await alone.callTool({ name: "destroy_sandbox", arguments: { sandbox_id: sandbox.id } })
    } finally {
      await alone.close()
    }
    const init = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } })
    const post = (route: string, token: string, headers: Record<string, string> = {}) =>
      api(server.url).post(route, { token, rawBody: init, headers: { "content-type": "application/json", ...headers } })
    expectEnvelope(await post("/v1/mcp", auth.token, { "x-metal-project-id": "prj_someoneelse0000000000000000000" }), 403, "forbidden")
    expectEnvelope(await post("/v1/mcp", "metal_sk_nope"), 401, "unauthenticated")
    expectEnvelope(await post("/v1/mcp", owner.user_token), 401, "unauthenticated")
  }, 60_000)

  it("/v1/projects/{project_id}/mcp: the project from the path, which the key must belong to", async () => {
    const inPath = await connect({ token: auth.token }, `/v1/projects/${auth.project}/mcp`)
    try {
      expect((await inPath.callTool({ name: "list_sandboxes", arguments: {} })).isError).toBeFalsy()
    } finally {
      await inPath.close()
    }
    // Another project of the same organization, and its key.
    const http = api(server.url)
    const other = (await http.post(`/v1/organizations/${owner.organization_id}/projects`, { token: owner.user_token, body: { name: "Other", slug: "other" } })).body
    const otherKey = (await http.post(`/v1/projects/${other.id}/api-keys`, { token: owner.user_token, body: { name: "other" } })).body.key
    const init = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } })
    const post = (route: string, token: string, headers: Record<string, string> = {}) =>
      api(server.url).post(route, { token, rawBody: init, headers: { "content-type": "application/json", ...headers } })
    expect((await post(`/v1/projects/${other.id}/mcp`, otherKey)).status).toBe(200)
    expectEnvelope(await post(`/v1/projects/${auth.project}/mcp`, otherKey), 403, "forbidden")
    expectEnvelope(await post(`/v1/projects/${auth.project}/mcp`, auth.token, { "x-metal-project-id": other.id }), 400, "project_mismatch")
    expect((await post(`/v1/projects/${auth.project}/mcp`, auth.token, { "x-metal-project-id": auth.project })).status).toBe(200)
    expectEnvelope(await post("/v1/projects/not-a-project/mcp", auth.token), 422, "validation_error")
  })
})

/**
 * The MCP Inspector's CLI mode (`@modelcontextprotocol/inspector`, pinned in package.json), as a person would point
 * it at the gateway: a URL and the key, no project header. Its launcher wants Node 22.19 or later, so it is run
 * with Bun (this machine's Node is older); it needs no network beyond the gateway on loopback.
 */
describe("the MCP Inspector's CLI", () => {
  const INSPECTOR = path.resolve(import.meta.dirname, "../../node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js")
  const inspector = async (route: string, ...args: Array<string>) => {
    const child = Bun.spawn([process.execPath, INSPECTOR, "--cli", `${server.url}${route}`, "--transport", "http", "--header", `Authorization: Bearer ${auth.token}`, ...args], {
      // Its catalog and secrets live under HOME: a directory of the test's own.
      env: { ...process.env, HOME: tempDataDir("inspector-home") },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe"
    })
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
    return { code, stdout, stderr }
  }

  it("lists the tools with the key alone, and calls one at the project's path", async () => {
    const listed = await inspector("/v1/mcp", "--method", "tools/list")
    expect(listed.code, listed.stderr).toBe(0)
    expect(JSON.parse(listed.stdout).tools.map((t: { name: string }) => t.name).sort()).toEqual(TOOL_NAMES)
    const called = await inspector(`/v1/projects/${auth.project}/mcp`, "--method", "tools/call", "--tool-name", "list_sandboxes", "--tool-arg", "limit=5")
    expect(called.code, called.stderr).toBe(0)
    expect(JSON.parse(called.stdout)).toMatchObject({ structuredContent: { sandboxes: expect.any(Array) } })
    expect(called.stdout).not.toContain("isError")
  }, 60_000)
})

describe("MCP transport refusals", () => {
  const post = (body: string, headers: Record<string, string> = {}) =>
    api(server.url).post("/v1/mcp", { token: auth.token, project: auth.project, rawBody: body, headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers } })

  it("refuses bad credentials, other methods and media types in the envelope", async () => {
    const init = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } })
    expectEnvelope(await api(server.url).post("/v1/mcp", { token: "metal_sk_nope", project: auth.project, rawBody: init, headers: { "content-type": "application/json" } }), 401)
    expectEnvelope(await api(server.url).get("/v1/mcp", auth), 405, "method_not_allowed")
    expectEnvelope(await post(init, { "content-type": "text/plain" }), 415, "unsupported_media_type")
    expectEnvelope(await post(init, { "mcp-protocol-version": "1999-01-01" }), 400, "unsupported_protocol_version")
  })

  it("answers JSON-RPC errors for what is not a JSON-RPC request", async () => {
    const parse = await post("{not json")
    expect(parse.status).toBe(400)
    expect(parse.body.error.code).toBe(-32700)
    expect((await post("[]")).body.error.code).toBe(-32600)
    expect((await post(JSON.stringify({ jsonrpc: "1.0", id: 1, method: "ping" }))).body.error.code).toBe(-32600)
    expect((await post(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "resources/list" }))).body.error).toMatchObject({ code: -32601 })
    expect((await post(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }))).status).toBe(202)
    expect((await post(JSON.stringify({ jsonrpc: "2.0", id: 3, method: "ping" }))).body).toEqual({ jsonrpc: "2.0", id: 3, result: {} })
  })
})
