/**
 * The program type-checks (`bun run check`'s checker, run by the test command too). Beyond strict types, this is
 * where each route's declared error codes (`failsWith` in src/http/groups) are checked against what its handler can
 * fail with: HttpApi refuses a handler whose error type holds a code its route does not declare.
 */
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const ROOT = path.resolve(import.meta.dirname, "../..")

describe("types", () => {
  it("the whole tree type-checks", async () => {
    const check = Bun.spawn(["bun", "check", "--no-script"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" })
    const [out, err, code] = await Promise.all([new Response(check.stdout).text(), new Response(check.stderr).text(), check.exited])
    expect(`${out}${err}`.split("\n").filter((line) => line.includes("error TS")).slice(0, 20)).toEqual([])
    expect(code).toBe(0)
  }, 600_000)
})
