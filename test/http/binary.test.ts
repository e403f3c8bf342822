/** `bun run build` makes one self-contained binary that starts the server like `bun run start`. */
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { api, bootstrap, startServer, tempDataDir } from "../support/server.ts"

describe("compiled binary", () => {
  it("builds, migrates a fresh DATA_DIR, serves /ready, the API and the docs", async () => {
    const outfile = path.join(tempDataDir("bin"), "sandbox-gateway")
    const build = Bun.spawnSync(["bun", "build", "--compile", "--minify", "src/main.ts", "--outfile", outfile], { cwd: path.resolve(import.meta.dirname, "../..") })
    expect(build.exitCode, build.stderr.toString()).toBe(0)
    const dataDir = tempDataDir("bin-data")
    // Run from another directory: nothing may be read from the checkout.
    const server = await startServer({ dataDir, command: [outfile], env: { HOME: os.tmpdir() } })
    try {
      const http = api(server.url)
      expect((await http.get("/ready")).body).toMatchObject({ status: "ready", checks: { database: "ok" } })
      expect((await http.get("/docs")).status).toBe(200)
      const boot = await bootstrap(dataDir, "binary@example.com")
      expect((await http.get("/v1/organizations", { token: boot.user_token })).body.organizations).toHaveLength(1)
    } finally {
      await server.stop()
    }
  })
})
