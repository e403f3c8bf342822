/**
 * Domain policies through the real gateway (issue 14 item 2): `network.allow_domains` on E2B's emulator (its
 * adapter sends E2B's `network {allowOut, denyOut}`) and Daytona's (`domainAllowList`), whose emulators hand the
 * policy to the local runtime. The
 * gateway resolves through a test DNS server in a network namespace made here (RUNTIME_DNS_UPSTREAM); no outside
 * address is ever asked. A deny list finds no provider (none of E2B, Daytona and Vercel can send one).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { api, bootstrap, type RunningServer, startServer } from "../support/server.ts"
import { createReadySandbox, idempotencyKey, type KeyAuth, minimalSandbox, runProcess, waitOperation } from "../support/sandbox.ts"
import { makeTestNet, type TestNet } from "../support/testnet.ts"

let net: TestNet
let server: RunningServer
let http: ReturnType<typeof api>
let auth: KeyAuth

beforeAll(async () => {
  net = await makeTestNet({ "allowed.test": "public1", "api.allowed.test": "public1", "other.test": "public2" })
  server = await startServer({ env: { RUNTIME_DNS_UPSTREAM: net.dns } })
  http = api(server.url)
  const owner = await bootstrap(server.dataDir, "policy@example.com")
  auth = { token: owner.api_key, project: owner.project_id }
}, 60_000)
afterAll(async () => {
  await server?.stop()
  net?.cleanup()
})

describe("allow_domains through the gateway", () => {
  for (const provider of ["e2b", "daytona"]) it(`${provider}: an allowed name (and *.name) is reached; another name is NXDOMAIN; a literal IP is refused`, async () => {
    const sandbox = await createReadySandbox(http, auth, minimalSandbox({
      provider,
      network: { internet_access: true, allow_domains: ["allowed.test", "*.allowed.test"] }
    }))
    expect(sandbox).toMatchObject({ provider, state: "ready" })
    const script = `
import socket
for target in ["allowed.test", "api.allowed.test", "other.test", ${JSON.stringify(net.public2)}]:
    try:
        address = socket.getaddrinfo(target, ${net.port}, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror as e:
        print(target, "nxdomain" if e.errno == socket.EAI_NONAME else "resolve-failed"); continue
    s = socket.socket(); s.settimeout(5)
    try:
        s.connect((address, ${net.port})); s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        answer = b""
        while True:
            chunk = s.recv(4096)
            if not chunk: break
            answer += chunk
        print(target, "CONNECTED", answer.decode(errors="replace").split("\\r\\n\\r\\n")[-1])
    except Exception as e:
        print(target, "refused")
`
    const run = await runProcess(http, auth, sandbox.id, ["python3", "-c", script])
    const seen = Object.fromEntries(run.stdout.trim().split("\n").map((l: string) => [l.split(" ")[0], l.split(" ").slice(1).join(" ")]))
    expect(seen["allowed.test"]).toBe(`CONNECTED test host ${net.public1}`)
    expect(seen["api.allowed.test"]).toBe(`CONNECTED test host ${net.public1}`)
    expect(seen["other.test"]).toBe("nxdomain")
    expect(seen[net.public2]).toBe("refused")
    expect(net.asked()).not.toContain("other.test")
  }, 90_000)

  it("deny_domains: no provider can enforce a deny list of names, so none is eligible", async () => {
    const created = await http.post("/v1/sandboxes", {
      ...auth,
      body: minimalSandbox({ network: { internet_access: true, deny_domains: ["other.test"] } }),
      headers: { "idempotency-key": idempotencyKey("deny") }
    })
    expect(created.status).toBe(202)
    const op = await waitOperation(http, auth, created.body.operation.id, 30_000)
    expect(op.state).toBe("failed")
    expect(op.error.code).toBe("no_eligible_provider")
    expect(JSON.stringify(op.error.details.attempts)).toMatch(/domain deny list/)
  }, 60_000)
})
