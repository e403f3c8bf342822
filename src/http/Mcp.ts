/**
 * The Model Context Protocol server at `POST /v1/mcp` and `POST /v1/projects/{project_id}/mcp` (Streamable HTTP
 * transport, JSON responses, stateless: no session id, no server-sent stream — GET and DELETE are 405, as the
 * transport allows). Authenticated like the sandbox routes, except that the project may go without saying: a
 * project API key belongs to one project, so `X-Metal-Project-ID` is optional (given, it must match, as on the
 * API), and the project path names it for clients that cannot send headers of their own. Every message is first
 * checked against the API, and each tool call is a few calls of the API itself, made in-process through the
 * server with the caller's key and project (src/http/McpTools.ts). JSON-RPC problems answer JSON-RPC errors;
 * HTTP problems (method, media type, credentials, size) the error envelope.
 */
import type { ErrorCode } from "../domain/ErrorCodes.ts"
import { GATEWAY_VERSION } from "../domain/Version.ts"
import { newRequestId } from "./RequestId.ts"
import { type ApiCall, type ApiAnswer, toolError, TOOLS } from "./McpTools.ts"

export const MCP_PATH = "/v1/mcp"
/** The same server with the project in the path (Bun's route pattern). */
export const PROJECT_MCP_PATH = "/v1/projects/:project_id/mcp"
const PROJECT_IN_PATH = /^\/v1\/projects\/([^/]+)\/mcp$/

/** The project of a live project API key (the bearer token), if it is one; the API's own check answers otherwise. */
export type KeyProject = (token: string) => Promise<string | undefined>
/** Newest first: an initialize asking for another version gets the newest. */
const PROTOCOL_VERSIONS = ["2025-06-18", "2025-03-26", "2024-11-05"]
const SERVER_INFO = { name: "sandbox-gateway", title: "Sandbox Gateway", version: GATEWAY_VERSION }
const INSTRUCTIONS =
  "Sandboxes are isolated machines: create_sandbox gives you one (keep its id), run_command runs argv in it and waits, returning its exit code, stdout and stderr; read_file / write_file / list_directory work on its files, expose_port serves an HTTP port at a URL; list_sandboxes and get_sandbox find them again, pause_sandbox / resume_sandbox keep one for later without running it, destroy_sandbox ends it."

type Route = (request: Request, server: Bun.Server<unknown>) => Promise<Response>

const envelope = (status: number, code: ErrorCode, message: string, headers: Record<string, string> = {}) => {
  const requestId = newRequestId()
  return Response.json({ code, message, request_id: requestId, retryable: status >= 500, details: {} }, { status, headers: { "x-request-id": requestId, ...headers } })
}

const rpcResult = (id: unknown, result: unknown) => Response.json({ jsonrpc: "2.0", id, result })
const rpcError = (id: unknown, code: number, message: string, status = 200) => Response.json({ jsonrpc: "2.0", id, error: { code, message } }, { status })

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * The credentials passed on to every API call made for the MCP request: its Authorization, and the project — the
 * path's, else the header's, else the key's own. A header that names another project than the path is refused.
 */
const credentialsOf = async (request: Request, keyProject: KeyProject): Promise<Record<string, string> | Response> => {
  const authorization = request.headers.get("authorization")
  const header = request.headers.get("x-metal-project-id") ?? ""
  const fromPath = PROJECT_IN_PATH.exec(new URL(request.url).pathname)?.[1]
  if (fromPath !== undefined && header !== "" && header !== fromPath) {
    return envelope(400, "project_mismatch", "X-Metal-Project-ID names another project than the path")
  }
  const bearer = /^bearer\s+(\S+)\s*$/i.exec(authorization ?? "")?.[1]
  const project = fromPath ?? (header !== "" ? header : bearer === undefined ? undefined : await keyProject(bearer))
  return {
    ...(authorization === null ? {} : { authorization }),
    ...(project === undefined ? {} : { "x-metal-project-id": project })
  }
}

/** API calls with the MCP request's credentials, through the server in-process. */
const apiOf = (request: Request, server: Bun.Server<unknown>, auth: Record<string, string>): ApiCall => {
  const origin = new URL(request.url).origin
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

export const mcpRoute = (keyProject: KeyProject): Route => async (request, server) => {
  if (request.method !== "POST") return envelope(405, "method_not_allowed", "The MCP endpoint takes JSON-RPC messages by POST (no server-sent stream)", { allow: "POST" })
  if (!(request.headers.get("content-type") ?? "").toLowerCase().startsWith("application/json")) {
    return envelope(415, "unsupported_media_type", "MCP messages are sent as application/json")
  }
  const version = request.headers.get("mcp-protocol-version")
  if (version !== null && !PROTOCOL_VERSIONS.includes(version)) {
    return envelope(400, "unsupported_protocol_version", `MCP-Protocol-Version ${version.slice(0, 40)} is not supported; use one of ${PROTOCOL_VERSIONS.join(", ")}`)
  }
  // The credentials, checked as the sandbox routes check them (their answer is the envelope the caller gets).
  const auth = await credentialsOf(request, keyProject)
  if (auth instanceof Response) return auth
  const probe = await server.fetch(new Request(new URL("/v1/sandboxes?limit=1", request.url), { headers: auth }))
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
  return handle(message, apiOf(request, server, auth))
}
