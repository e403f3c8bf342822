/**
 * The clients move with the API (issue 24 item 7): the gateway's version is package.json's (src/domain/Version.ts,
 * served by /v1/meta); the TypeScript client's package and the Python client carry the same one.
 */
import { describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { GATEWAY_VERSION } from "../../src/domain/Version.ts"

const ROOT = path.resolve(import.meta.dirname, "../..")
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), "utf8")

describe("the clients' versions", () => {
  it("the TypeScript client's package has the gateway's version", () => {
    expect(JSON.parse(read("client/package.json")).version).toBe(GATEWAY_VERSION)
  })

  it("the install line of docs/clients/typescript.md names the peers' versions the package asks for", () => {
    const peers = JSON.parse(read("client/package.json")).peerDependencies as Record<string, string>
    const line = read("docs/clients/typescript.md").split("\n").find((l) => l.startsWith("npm install /path/to/sandbox-gateway-client-"))
    expect(line).toBe(`npm install /path/to/sandbox-gateway-client-${GATEWAY_VERSION}.tgz ${Object.entries(peers).map(([name, version]) => `${name}@${version}`).join(" ")}`)
  })

  it("the Python client has the gateway's version (its pyproject reads it from _version.py)", () => {
    expect(/^__version__ = "([^"]+)"$/m.exec(read("clients/python/sandbox_gateway/_version.py"))?.[1]).toBe(GATEWAY_VERSION)
    expect(read("clients/python/pyproject.toml")).toMatch(/^version = \{ attr = "sandbox_gateway\._version\.__version__" \}$/m)
  })
})
