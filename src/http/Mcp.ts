/**
 * The Model Context Protocol server at `POST /v1/mcp` (Streamable HTTP transport, JSON responses, stateless: no
 * session id, no server-sent stream — GET and DELETE are 405, as the transport allows). Authenticated like the
 * sandbox routes (a project API key and `X-Metal-Project-ID`): every message is first checked against the API,
 * and each tool call is a few calls of the API itself, made in-process through the server with the caller's
 * headers (src/http/McpTools.ts). JSON-RPC problems answer JSON-RPC errors; HTTP problems (method, media type,
 * credentials, size) the error envelope.
 */
import { newRequestId } from "./RequestId.ts"
import { type ApiCall, type ApiAnswer, toolError, TOOLS } from "./McpTools.ts"

export const MCP_PATH = "/v1/mcp"
/** Newest first: an initialize asking for another version gets the newest. */
const PROTOCOL_VERSIONS = ["2025-06-18", "2025-03-26", "2024-11-05"]
const SERVER_INFO = { name: "sandbox-gateway", title: "Sandbox Gateway", version: "0.1.0" }
const INSTRUCTIONS =
  "Sandboxes are isolated machines: create_sandbox gives you one (keep its id), run_command runs argv in it and waits, read_file / write_file / list_directory work on its files, expose_port serves an HTTP port at a URL, destroy_sandbox ends it."

type Route = (request: Request, server: Bun.Server<unknown>) => Promise<Response>

const envelope = (status: number, code: string, message: string, headers: Record<string, string> = {}) => {
  const requestId = newRequestId()
  return Response.json({ code, message, request_id: requestId, retryable: status >= 500, details: {} }, { status, headers: { "x-request-id": requestId, ...headers } })
}

const rpcResult = (id: unknown, result: unknown) => Response.json({ jsonrpc: "2.0", id, result })
const rpcError = (id: unknown, code: number, message: string, status = 200) => Response.json({ jsonrpc: "2.0", id, error: { code, message } }, { status })

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** The credentials of the MCP request, passed on to every API call made for it. */
const authHeaders = (request: Request): Record<string, string> =>
  Object.fromEntries(["authorization", "x-metal-project-id"].flatMap((name) => {
    const value = request.headers.get(name)
    return value === null ? [] : [[name, value]]
  }))

/** API calls with the MCP request's credentials, through the server in-process. */
const apiOf = (request: Request, server: Bun.Server<unknown>): ApiCall => {
  const origin = new URL(request.url).origin
  const auth = authHeaders(request)
  return async (method, path, body, headers = {}): Promise<ApiAnswer> => {
    const response = await server.fetch(new Request(origin + path, {
      method,
      headers: {
        ...auth,
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
        ...(method !== "GET" ? { "idempotency-key": `mcp-${crypto.randomUUID()}` } : {}),
        ...headers
      },
      body: body === undefined ? null : JSON.stringify(body)
    }))
    const text = await response.text()
    const json = (response.headers.get("content-type") ?? "").includes("application/json")
    return { status: response.status, body: json && text !== "" ? JSON.parse(text) : text }
  }
}

const handle = async (message: Record<string, unknown>, api: ApiCall): Promise<Response> => {
  const id = message["id"]
  const params = isObject(message["params"]) ? message["params"] : {}
  switch (message["method"]) {
    case "initialize": {
      const asked = params["protocolVersion"]
      const version = typeof asked === "string" && PROTOCOL_VERSIONS.includes(asked) ? asked : PROTOCOL_VERSIONS[0]
      return rpcResult(id, { protocolVersion: version, capabilities: { tools: { listChanged: false } }, serverInfo: SERVER_INFO, instructions: INSTRUCTIONS })
    }
    case "ping":
      return rpcResult(id, {})
    case "tools/list":
      return rpcResult(id, { tools: TOOLS.map(({ description, inputSchema, name, title }) => ({ name, title, description, inputSchema })) })
    case "tools/call": {
      const tool = TOOLS.find((t) => t.name === params["name"])
      if (tool === undefined) return rpcError(id, -32602, `Unknown tool: ${String(params["name"]).slice(0, 100)}`)
      const args = params["arguments"] ?? {}
      if (!isObject(args)) return rpcError(id, -32602, "arguments must be an object")
      const result = await tool.run(args, api).catch(toolError)
      return rpcResult(id, result)
    }
    default:
      return rpcError(id, -32601, `Method not found: ${String(message["method"]).slice(0, 100)}`)
  }
}

export const mcpRoute: Route = async (request, server) => {
  if (request.method !== "POST") return envelope(405, "method_not_allowed", "The MCP endpoint takes JSON-RPC messages by POST (no server-sent stream)", { allow: "POST" })
  if (!(request.headers.get("content-type") ?? "").toLowerCase().startsWith("application/json")) {
    return envelope(415, "unsupported_media_type", "MCP messages are sent as application/json")
  }
  const version = request.headers.get("mcp-protocol-version")
  if (version !== null && !PROTOCOL_VERSIONS.includes(version)) {
    return envelope(400, "unsupported_protocol_version", `MCP-Protocol-Version ${version.slice(0, 40)} is not supported; use one of ${PROTOCOL_VERSIONS.join(", ")}`)
  }
  // The credentials, checked as the sandbox routes check them (their answer is the envelope the caller gets).
  const probe = await server.fetch(new Request(new URL("/v1/sandboxes?limit=1", request.url), { headers: authHeaders(request) }))
  if (probe.status !== 200) return probe
  let message: unknown
  try {
    message = JSON.parse(await request.text())
  } catch {
    return rpcError(null, -32700, "Parse error: the body is not JSON", 400)
  }
  if (Array.isArray(message)) return rpcError(null, -32600, "Batches are not supported: send one message per request", 400)
  if (!isObject(message) || message["jsonrpc"] !== "2.0") return rpcError(null, -32600, "Invalid request: not a JSON-RPC 2.0 message", 400)
  // Notifications and responses need no answer.
  if (message["id"] === undefined || typeof message["method"] !== "string") return new Response(null, { status: 202 })
  const id = message["id"]
  if (typeof id !== "string" && typeof id !== "number") return rpcError(null, -32600, "Invalid request: id must be a string or a number", 400)
  return handle(message, apiOf(request, server))
}
