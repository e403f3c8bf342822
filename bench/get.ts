/** GET /v1/sandboxes/{id} against a bare Bun.serve reading the same row (issue 3: ratio ≤ 2×). */
import * as path from "node:path"
import { type BenchGateway, firstLine, ROUNDS, time } from "./measure.ts"
import { report } from "./report.ts"

/** The GET baseline: a bare Bun.serve answering one row of the gateway's SQLite file (args: file, sandbox id). */
const BARE_SERVER = `
const { Database } = require("bun:sqlite")
const [file, id] = process.argv.slice(-2)
const query = new Database(file, { readonly: true }).query("SELECT * FROM sandboxes WHERE id = ?")
const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => Response.json(query.get(id)) })
console.log("http://127.0.0.1:" + server.port + "/")
`

export const benchGet = async ({ server, auth }: BenchGateway, sandbox: { readonly id: string }) => {
  // 4. GET /v1/sandboxes/{id} vs a bare Bun.serve that reads the same row from the same SQLite file. The bare
  // server runs in its own process, like the gateway, and both are read by the same client call (the same
  // headers, the body read as text), so the ratio is the gateway's own cost.
  const bare = Bun.spawn(["bun", "-e", BARE_SERVER, path.join(server.dataDir, "gateway.sqlite"), sandbox.id], { stdout: "pipe", stderr: "inherit" })
  const bareUrl = await firstLine(bare.stdout)
  const get = (url: string) => async () => {
    const response = await fetch(url, { headers: { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project } })
    if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}`)
    await response.text()
  }
  const bareGet = await time(get(bareUrl), ROUNDS * 3)
  const apiGet = await time(get(`${server.url}/v1/sandboxes/${sandbox.id}`), ROUNDS * 3)
  report("GET /v1/sandboxes/{id}", apiGet, { name: "bare Bun.serve + SQLite row", s: bareGet }, "ratio ≤ 2×")
  bare.kill()
}
