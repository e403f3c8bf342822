/** What the server says on start (src/http/Welcome.ts): the bootstrap command for its data, runnable as printed. */
import { describe, expect, it } from "vitest"
import { displayDatabaseUrl } from "../../src/Config.ts"
import { bootstrapCommand, welcomeText } from "../../src/http/Welcome.ts"

const endpoints = { _tag: "path", origin: "http://127.0.0.1:8081" } as const

describe("the start-up banner", () => {
  it("names the dashboard, API, docs, endpoints and data; the bootstrap command only while there is no user", () => {
    const input = { apiOrigin: "http://127.0.0.1:8080", endpoints, config: { dataDir: "/srv/gw/data", databaseUrl: undefined }, operatorCommand: "bun run cli" }
    const fresh = welcomeText({ ...input, hasUsers: false })
    expect(fresh).toContain("API        http://127.0.0.1:8080/v1   (OpenAPI: http://127.0.0.1:8080/v1/openapi.json)")
    expect(fresh).toContain("Docs       http://127.0.0.1:8080/docs")
    expect(fresh).toContain("Dashboard  http://127.0.0.1:8080/   (sign in: bun run cli login-link --email <email>)")
    expect(fresh).toContain("Endpoints  http://127.0.0.1:8081")
    expect(fresh).toContain("\n  DATA_DIR=/srv/gw/data bun run cli bootstrap --email you@example.com --json")
    expect(welcomeText({ ...input, hasUsers: true })).not.toContain("bootstrap")
    const hosts = welcomeText({ ...input, endpoints: { _tag: "host", scheme: "https", baseHost: "sbx.example.com", port: "" }, hasUsers: true })
    expect(hosts).toContain("Endpoints  https://<endpoint>.sbx.example.com")
  })

  it("quotes what the shell would split, and never prints a database password", () => {
    expect(bootstrapCommand({ dataDir: "/srv/my gw/it's", databaseUrl: undefined }, "'/opt/sandbox gateway'"))
      .toBe(`DATA_DIR='/srv/my gw/it'\\''s' '/opt/sandbox gateway' bootstrap --email you@example.com --json`)
    const url = "postgres://gw:s3cret@db.internal:5432/gateway?sslmode=require"
    const command = bootstrapCommand({ dataDir: "/srv/gw", databaseUrl: url }, "bun run cli")
    expect(command).toBe("DATA_DIR=/srv/gw DATABASE_URL='postgres://gw:***@db.internal:5432/gateway?sslmode=require' bun run cli bootstrap --email you@example.com --json")
    const text = welcomeText({ apiOrigin: "http://127.0.0.1:8080", endpoints, config: { dataDir: "/srv/gw", databaseUrl: url }, hasUsers: false, operatorCommand: "bun run cli" })
    expect(text).not.toContain("s3cret")
    expect(text).toContain("its password is not shown here")
    expect(displayDatabaseUrl("postgres://db.internal/gateway?password=s3cret")).not.toContain("s3cret")
    // Without a password the command is exact.
    expect(bootstrapCommand({ dataDir: "/srv/gw", databaseUrl: "postgres://gw@db.internal/gateway" }, "bun run cli")).toContain("DATABASE_URL=postgres://gw@db.internal/gateway ")
  })
})
