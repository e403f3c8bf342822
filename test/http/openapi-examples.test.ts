/**
 * The OpenAPI document is usable by a tool as it is (issue 24, item 5): sandbox routes name both credentials they
 * take (the project API key and the X-Metal-Project-ID header, together), and every request body's example
 * succeeds as it is — each is sent, in an order that gives it the resources its path names, to a real server,
 * and must get one of the documented success statuses.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { REQUEST_EXAMPLES } from "../../src/http/Examples.ts"
import { type api, type Bootstrap, openGateway, type RunningServer, runCli } from "../support/server.ts"
import { idempotencyKey, poll, waitOperation } from "../support/sandbox.ts"

let server: RunningServer
let http: ReturnType<typeof api>
let owner: Bootstrap
let doc: any

beforeAll(async () => {
  ;({ server, http, owner } = await openGateway("examples@example.com"))
  doc = await (await fetch(`${server.url}/v1/openapi.json`)).json()
}, 120_000)
afterAll(() => server.stop())

interface Operation {
  readonly method: string
  readonly path: string
  readonly op: any
}
const operations = (): Array<Operation> =>
  Object.entries<any>(doc.paths).flatMap(([path, item]) => Object.entries<any>(item).map(([method, op]) => ({ method, path, op })))
const byId = (id: string): Operation => {
  const found = operations().find((o) => o.op.operationId === id)
  if (found === undefined) throw new Error(`no operation ${id}`)
  return found
}

type Auth = { readonly user: string } | { readonly key: string; readonly project: string }

/** What a send changes of the example: headers besides the credential's, and a credential the body carries. */
interface Adjust {
  readonly headers?: Record<string, string>
  readonly body?: (example: any) => unknown
}

/** Sends operation `id`'s documented example to its path (`params` fill it) and checks a documented success. */
const sendExample = async (id: string, params: Record<string, string>, auth: Auth, query = "", adjust: Adjust = {}) => {
  const { method, path, op } = byId(id)
  const url = server.url + path.replace(/\{(\w+)\}/g, (_, name: string) => {
    if (params[name] === undefined) throw new Error(`${id}: no value for {${name}}`)
    return params[name]!
  }) + query
  const [type, media] = Object.entries<any>(op.requestBody.content)[0]!
  const headers: Record<string, string> = { "content-type": type, "idempotency-key": idempotencyKey(id), ...adjust.headers }
  if ("user" in auth) headers["authorization"] = `Bearer ${auth.user}`
  else Object.assign(headers, { authorization: `Bearer ${auth.key}`, "x-metal-project-id": auth.project })
  const example = adjust.body === undefined ? media.example : adjust.body(media.example)
  const body = typeof example === "string" ? example : JSON.stringify(example)
  const res = await fetch(url, { method: method.toUpperCase(), headers, body })
  const text = await res.text()
  const documented = Object.keys(op.responses).filter((s) => s.startsWith("2"))
  expect(documented, `${id}: ${res.status} ${text}`).toContain(String(res.status))
  return text === "" ? undefined : JSON.parse(text)
}

describe("the OpenAPI document as a tool reads it", () => {
  it("every route that takes a project API key also requires the project header, as a security scheme", () => {
    expect(doc.components.securitySchemes.projectHeader).toEqual(expect.objectContaining({ type: "apiKey", in: "header", name: "X-Metal-Project-ID" }))
    const keyed = operations().filter((o) => JSON.stringify(o.op.security ?? []).includes("projectKey"))
    expect(keyed.length).toBeGreaterThan(20)
    for (const { method, path, op } of keyed) expect(op.security, `${method} ${path}`).toEqual([{ projectKey: [], projectHeader: [] }])
  })

  it("every request body has an example, and every example belongs to a route", () => {
    const withBody = operations().filter((o) => o.op.requestBody !== undefined)
    const missing = withBody.filter((o) => Object.values<any>(o.op.requestBody.content).some((m) => m.example === undefined)).map((o) => o.op.operationId)
    expect(missing).toEqual([])
    const ids = new Set(withBody.map((o) => o.op.operationId))
    expect(Object.keys(REQUEST_EXAMPLES).filter((id) => !ids.has(id))).toEqual([])
  })

  it("every example succeeds as it is, sent to a real server", async () => {
    const user = { user: owner.user_token }
    const key = { key: owner.api_key, project: owner.project_id }
    const org = owner.organization_id
    const sent = new Set<string>()
    const send = async (id: string, params: Record<string, string>, auth: Auth, query?: string, adjust?: Adjust) => {
      sent.add(id)
      return sendExample(id, params, auth, query, adjust)
    }
    /** The operation ended well: read with the key, or (a member's, which a key does not see) on the project path. */
    const succeeded = async (operationId: string, onProjectPath = false) => {
      const done = onProjectPath
        ? await poll(async () => (await http.get(`/v1/projects/${owner.project_id}/operations/${operationId}`, { token: owner.user_token })).body, (op) => ["succeeded", "failed", "cancelled"].includes(op?.state), 60_000)
        : await waitOperation(http, { token: owner.api_key, project: owner.project_id }, operationId, 60_000)
      expect(done.state, JSON.stringify(done.error)).toBe("succeeded")
    }

    // Accounts: another organization (deleted at the end), this one renamed, a teammate invited then a member.
    const other = await send("organizations.create", {}, user)
    await send("organizations.update", { organization_id: org }, user)
    const invitation = await send("members.invite", { organization_id: org }, user)
    await send("members.updateInvitation", { organization_id: org, invitation_id: invitation.id }, user)
    expect((await runCli(server.dataDir, ["users", "create", "--email", "teammate@example.com"])).code).toBe(0)
    const teammateToken = (await runCli(server.dataDir, ["tokens", "create", "--email", "teammate@example.com"])).stdout.trim()
    await fetch(`${server.url}/v1/organizations`, { headers: { authorization: `Bearer ${teammateToken}` } }) // accepts the invitation
    const members = await (await fetch(`${server.url}/v1/organizations/${org}/members`, { headers: { authorization: `Bearer ${owner.user_token}` } })).json()
    const teammate = members.members.find((m: any) => m.email === "teammate@example.com")
    await send("members.update", { organization_id: org, user_id: teammate.user_id }, user)
    const project = await send("projects.create", { organization_id: org }, user)
    await send("projects.update", { project_id: project.id }, user)
    await send("apiKeys.create", { project_id: owner.project_id }, user)
    await send("billing.autoTopup", { organization_id: org }, user)
    const webhook = await send("webhooks.create", { organization_id: org }, user)
    await send("webhooks.update", { organization_id: org, webhook_id: webhook.id }, user)
    // The dashboard's sign-in: the example's shape with a token of this test's (a credential cannot be an example),
    // sent as the page sends it, from the gateway's own origin with the CSRF header.
    const signedIn = await send("sessions.signIn", {}, user, "", {
      headers: { origin: server.url, "x-metal-csrf": "1" },
      body: (example) => ({ ...example, user_token: owner.user_token })
    })
    expect(signedIn).toMatchObject({ via: "session", user: { id: owner.user_id } })

    // Sandboxes: the example's sandbox, and processes, files and an endpoint in it.
    const created = await send("sandboxes.create", {}, key)
    const sandbox = created.sandbox.id
    await succeeded(created.operation.id)
    await send("sandboxes.extend", { sandbox_id: sandbox }, key)
    await send("processes.start", { sandbox_id: sandbox }, key)
    // Standard input needs a process that takes it, on a provider that takes input.
    const withStdin = await startStdinProcess(key)
    await send("processes.stdin", { sandbox_id: withStdin.sandbox, process_id: withStdin.process }, key)
    await send("filesystem.write", { sandbox_id: sandbox }, key)
    await send("filesystem.read", { sandbox_id: sandbox }, key)
    await send("filesystem.list", { sandbox_id: sandbox }, key)
    await send("filesystem.delete", { sandbox_id: sandbox }, key)
    await send("filesystem.writeContent", { sandbox_id: sandbox }, key, "?path=/workspace/raw.txt")
    await send("endpoints.create", { sandbox_id: sandbox }, key)
    // Computer use needs a sandbox with a desktop.
    const desktop = await createDesktopSandbox(key)
    await send("computer.action", { sandbox_id: desktop }, key)
    await send("computer.screenshot", { sandbox_id: desktop }, key)
    await send("computer.startRecording", { sandbox_id: desktop }, key)

    // The project path (the dashboard's) with the user's token: the same bodies, in a sandbox of its own.
    const inProject = { project_id: owner.project_id }
    const mine = await send("projectSandboxes.create", inProject, user)
    await succeeded(mine.operation.id, true)
    const inMine = { ...inProject, sandbox_id: mine.sandbox.id }
    await send("projectSandboxes.extend", inMine, user)
    await send("projectProcesses.start", inMine, user)
    const stdinProcess = await startStdinProcessIn(key, withStdin.sandbox)
    await send("projectProcesses.stdin", { ...inProject, sandbox_id: withStdin.sandbox, process_id: stdinProcess }, user)
    await send("projectFilesystem.write", inMine, user)
    await send("projectFilesystem.read", inMine, user)
    await send("projectFilesystem.list", inMine, user)
    await send("projectFilesystem.delete", inMine, user)
    await send("projectFilesystem.writeContent", inMine, user, "?path=/workspace/raw.txt")
    await send("projectEndpoints.create", inMine, user)

    // Last: what changes the organization's footing (its credentials; the other organization goes).
    await send("providerCredentials.put", { organization_id: org, provider: "e2b" }, user)
    await send("organizations.delete", { organization_id: other.id }, user)

    expect([...sent].sort()).toEqual(Object.keys(REQUEST_EXAMPLES).sort())
  }, 300_000)
})

/** A ready sandbox with a desktop (the create example, asking for computer use). */
const createDesktopSandbox = async (key: { key: string; project: string }) => {
  const headers = { authorization: `Bearer ${key.key}`, "x-metal-project-id": key.project, "content-type": "application/json", "idempotency-key": idempotencyKey("desktop") }
  const body = { ...(REQUEST_EXAMPLES["sandboxes.create"] as object), features: { computer_use: true } }
  const created = await (await fetch(`${server.url}/v1/sandboxes`, { method: "POST", headers, body: JSON.stringify(body) })).json()
  const op = await waitOperation(http, { token: key.key, project: key.project }, created.operation.id, 90_000)
  expect(op.state, JSON.stringify(op.error)).toBe("succeeded")
  return created.sandbox.id as string
}

/** A running process with standard input open, on E2B (a provider that takes input). */
const startStdinProcess = async (key: { key: string; project: string }) => {
  const headers = { authorization: `Bearer ${key.key}`, "x-metal-project-id": key.project, "content-type": "application/json" }
  const created = await (await fetch(`${server.url}/v1/sandboxes`, {
    method: "POST",
    headers: { ...headers, "idempotency-key": idempotencyKey("stdin-sbx") },
    // E2B's environments are its base template (512 MiB): never less than asked, so this asks for what it gives.
    body: JSON.stringify({ ...(REQUEST_EXAMPLES["sandboxes.create"] as object), provider: "e2b", resources: { vcpu: 1, memory_mb: 512 }, features: {} })
  })).json()
  const done = await waitOperation(http, { token: key.key, project: key.project }, created.operation.id, 60_000)
  expect(done.state, JSON.stringify(done.error)).toBe("succeeded")
  return { sandbox: created.sandbox.id as string, process: await startStdinProcessIn(key, created.sandbox.id) }
}

/** Another process with standard input open in `sandbox`. */
const startStdinProcessIn = async (key: { key: string; project: string }, sandbox: string) => {
  const started = await (await fetch(`${server.url}/v1/sandboxes/${sandbox}/processes`, {
    method: "POST",
    headers: { authorization: `Bearer ${key.key}`, "x-metal-project-id": key.project, "content-type": "application/json", "idempotency-key": idempotencyKey("stdin-proc") },
    body: JSON.stringify({ command: ["sort"], stdin: true })
  })).json()
  return started.id as string
}
