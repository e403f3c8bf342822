import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type { SandboxProvider } from "../../src/providers/Provider.ts"
import { withWorkspace, workspacePaths } from "./workspace.ts"

describe("workspace paths", () => {
  it("rewrite /workspace and what is under it, nothing else, both ways", () => {
    const { toGateway, toProvider } = workspacePaths("/home/user/")
    expect(toProvider("/workspace")).toBe("/home/user")
    expect(toProvider("/workspace/a/b.txt")).toBe("/home/user/a/b.txt")
    expect(toProvider("/workspaces/x")).toBe("/workspaces/x")
    expect(toProvider("/etc/hosts")).toBe("/etc/hosts")
    expect(toGateway("/home/user")).toBe("/workspace")
    expect(toGateway("/home/user/a")).toBe("/workspace/a")
    expect(toGateway("/home/username")).toBe("/home/username")
    const relative = workspacePaths("workspace")
    expect(relative.toProvider("/workspace/x")).toBe("workspace/x")
  })

  it("an adapter sees provider paths and its caller gateway paths", async () => {
    const seen: Array<string> = []
    const inner = {
      exec: (_s: unknown, input: { cwd?: string }) => Effect.sync(() => (seen.push(`cwd ${input.cwd}`), { executionId: "x" })),
      readFile: (_s: unknown, input: { path: string }) => Effect.sync(() => (seen.push(`read ${input.path}`), { data: new Uint8Array(), offsetBytes: 0, sizeBytes: 0, eof: true })),
      listFiles: (_s: unknown, input: { path: string }) =>
        Effect.sync(() => (seen.push(`list ${input.path}`), { entries: [{ path: "/home/user/a.txt", type: "file" as const, sizeBytes: 1, modifiedAt: "" }], truncated: false }))
    } as unknown as SandboxProvider
    const wrapped = withWorkspace(inner, "/home/user")
    const sandbox = {} as never
    await Effect.runPromise(wrapped.exec(sandbox, { cwd: "/workspace/src" } as never))
    await Effect.runPromise(wrapped.readFile(sandbox, { path: "/workspace/f" } as never))
    const listed = await Effect.runPromise(wrapped.listFiles(sandbox, { path: "/workspace" } as never))
    expect(seen).toEqual(["cwd /home/user/src", "read /home/user/f", "list /home/user"])
    expect(listed.entries.map((e) => e.path)).toEqual(["/workspace/a.txt"])
    expect(withWorkspace(inner, "/workspace")).toBe(inner)
  })
})
