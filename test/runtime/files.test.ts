/** File operations through the agent in a real jail: binary-safe reads and writes, modes, listing, deleting. */
import { Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { RuntimeError } from "../../src/runtime/LocalRuntime.ts"
import { failure, newRuntime, run, sh } from "./support.ts"

const { rt, cleanup } = newRuntime("files")
const kind = async (effect: Parameters<typeof failure>[0]) => ((await failure(effect)) as RuntimeError).kind
const write = (p: string, data: Uint8Array, mode: "create" | "overwrite" | "append" = "overwrite", createParents = false) =>
  run(rt.writeFile("f", p, data, { mode, createParents }))

beforeAll(async () => {
  await run(rt.create({ id: "f", vcpu: 1, memoryMb: 256, internet: false }))
})
afterAll(cleanup)

describe("read and write", () => {
  it("round-trips all 256 byte values and honours offset, limit and eof", async () => {
    const bytes = new Uint8Array(1024).map((_, i) => i % 256)
    expect(await write("/workspace/bin/all.dat", bytes, "create", true)).toEqual({ bytesWritten: 1024, created: true })
    const whole = await run(rt.readFile("f", "/workspace/bin/all.dat", 0, 1 << 20))
    expect(Buffer.from(whole.data).equals(Buffer.from(bytes))).toBe(true)
    expect(whole).toMatchObject({ offset: 0, size: 1024, eof: true })
    const part = await run(rt.readFile("f", "/workspace/bin/all.dat", 250, 10))
    expect([...part.data]).toEqual([250, 251, 252, 253, 254, 255, 0, 1, 2, 3])
    expect(part).toMatchObject({ offset: 250, size: 1024, eof: false })
    const tail = await run(rt.readFile("f", "/workspace/bin/all.dat", 1020, 100))
    expect([...tail.data]).toEqual([252, 253, 254, 255])
    expect(tail.eof).toBe(true)
    const past = await run(rt.readFile("f", "/workspace/bin/all.dat", 5000, 10))
    expect(past).toMatchObject({ size: 1024, eof: true })
    expect(past.data.length).toBe(0)
    const none = await run(rt.readFile("f", "/workspace/bin/all.dat", 0, 0))
    expect(none.data.length).toBe(0)
    expect(none.eof).toBe(false)
    // The same bytes as a process inside sees them.
    expect((await sh(rt, "f", "od -An -tu1 -v /workspace/bin/all.dat | tr -s ' \\n' ' ' | cut -c1-20")).stdout).toBe(" 0 1 2 3 4 5 6 7 8 9\n")
    // An empty file.
    await write("/workspace/empty", new Uint8Array())
    expect(await run(rt.readFile("f", "/workspace/empty", 0, 10))).toMatchObject({ size: 0, eof: true })
  })

  it("create refuses an existing path, overwrite replaces, append appends, create_parents makes the directories", async () => {
    await write("/workspace/m.txt", new TextEncoder().encode("one"), "create")
    expect(await kind(rt.writeFile("f", "/workspace/m.txt", new Uint8Array([1]), { mode: "create", createParents: false }))).toBe("conflict")
    expect(await write("/workspace/m.txt", new TextEncoder().encode("+two"), "append")).toEqual({ bytesWritten: 4, created: false })
    expect(Buffer.from((await run(rt.readFile("f", "/workspace/m.txt", 0, 100))).data).toString()).toBe("one+two")
    expect(await write("/workspace/m.txt", new TextEncoder().encode("new"), "overwrite")).toEqual({ bytesWritten: 3, created: false })
    expect(Buffer.from((await run(rt.readFile("f", "/workspace/m.txt", 0, 100))).data).toString()).toBe("new")
    expect(await write("/workspace/appended-new", new TextEncoder().encode("x"), "append")).toEqual({ bytesWritten: 1, created: true })
    expect(await kind(rt.writeFile("f", "/workspace/no/parent/file", new Uint8Array([1]), { mode: "overwrite", createParents: false }))).toBe("not_found")
    expect((await write("/workspace/a/b/c/file", new Uint8Array([1]), "overwrite", true)).created).toBe(true)
    expect(await kind(rt.writeFile("f", "/workspace/a", new Uint8Array([1]), { mode: "overwrite", createParents: false }))).toBe("invalid")
    // Files written here belong to the sandbox user.
    expect((await sh(rt, "f", "stat -c %u /workspace/a/b/c/file")).stdout).toBe("1000\n")
  })

  it("streams a body of any size as it comes; a body that breaks off or passes the limit changes nothing", async () => {
    const chunk = new Uint8Array(1 << 20).map((_, i) => (i * 7) % 256)
    const body = (chunks: number, fail = false) => {
      let sent = 0
      return new ReadableStream<Uint8Array>({
        pull: (controller) => {
          if (sent === chunks) return fail ? controller.error(new Error("the client went away")) : controller.close()
          sent += 1
          controller.enqueue(chunk)
        }
      })
    }
    const stream = (p: string, chunks: number, options: { mode?: "create" | "overwrite" | "append"; maxBytes?: number; fail?: boolean } = {}) =>
      rt.writeFileStream("f", p, body(chunks, options.fail), { mode: options.mode ?? "overwrite", createParents: true, maxBytes: options.maxBytes ?? 1 << 30 })
    expect(await run(stream("/workspace/s/big.bin", 64))).toEqual({ bytesWritten: 64 << 20, created: true })
    expect((await sh(rt, "f", "stat -c %s /workspace/s/big.bin; ls -A /workspace/s")).stdout).toBe(`${64 << 20}\nbig.bin\n`)
    const ends = await run(rt.readFile("f", "/workspace/s/big.bin", (64 << 20) - (1 << 20), 1 << 20))
    expect(Buffer.compare(Buffer.from(ends.data), Buffer.from(chunk))).toBe(0)
    // Broken off, or over the limit: the file stays as it was and nothing is left beside it.
    expect(await kind(stream("/workspace/s/big.bin", 3, { fail: true }))).toBe("unavailable")
    expect(await kind(stream("/workspace/s/big.bin", 3, { maxBytes: 2 << 20 }))).toBe("invalid")
    expect(await kind(stream("/workspace/s/big.bin", 1, { mode: "create" }))).toBe("conflict")
    expect((await sh(rt, "f", "stat -c %s /workspace/s/big.bin; ls -A /workspace/s")).stdout).toBe(`${64 << 20}\nbig.bin\n`)
    expect(await run(stream("/workspace/s/big.bin", 2, { mode: "append" }))).toEqual({ bytesWritten: 2 << 20, created: false })
    expect((await sh(rt, "f", "stat -c %s /workspace/s/big.bin")).stdout).toBe(`${66 << 20}\n`)
  }, 60_000)

  it("reads a range as a stream of exactly its bytes: the whole file, a middle, past the end; errors as readFile's", async () => {
    const bytes = new Uint8Array(3 << 20).map((_, i) => (i * 13) % 251)
    await write("/workspace/r/three.bin", bytes, "overwrite", true)
    const collect = async (offset: number, limit: number) => {
      const read = await run(rt.readFileStream("f", "/workspace/r/three.bin", offset, limit))
      return { size: read.size, length: read.length, data: new Uint8Array(await new Response(read.stream).arrayBuffer()) }
    }
    const whole = await collect(0, 64 << 20)
    expect(whole).toMatchObject({ size: 3 << 20, length: 3 << 20 })
    expect(Buffer.compare(Buffer.from(whole.data), Buffer.from(bytes))).toBe(0)
    const middle = await collect(1000, 5000)
    expect(middle.length).toBe(5000)
    expect(Buffer.compare(Buffer.from(middle.data), Buffer.from(bytes.subarray(1000, 6000)))).toBe(0)
    expect(await collect(3 << 20, 10)).toMatchObject({ size: 3 << 20, length: 0, data: new Uint8Array() })
    expect(await kind(rt.readFileStream("f", "/workspace/r/missing", 0, 10))).toBe("not_found")
    expect(await kind(rt.readFileStream("f", "/workspace/r", 0, 10))).toBe("invalid")
    expect(await kind(rt.readFileStream("f", "relative", 0, 10))).toBe("invalid")
    expect(await kind(rt.readFileStream("f", "/workspace/r/three.bin", -1, 10))).toBe("invalid")
  })

  it("refuses bad arguments", async () => {
    expect(await kind(rt.readFile("f", "relative/path", 0, 10))).toBe("invalid")
    expect(await kind(rt.readFile("f", "/workspace/m.txt", -1, 10))).toBe("invalid")
    expect(await kind(rt.readFile("f", "/workspace/m.txt", 0, 1.5))).toBe("invalid")
    expect(await kind(rt.readFile("f", "/workspace/missing", 0, 10))).toBe("not_found")
    expect(await kind(rt.readFile("f", "/workspace", 0, 10))).toBe("invalid")
    expect(await kind(rt.readFile("nope", "/workspace/m.txt", 0, 10))).toBe("not_found")
    expect(await kind(rt.listFiles("f", "/workspace/m.txt", { recursive: false, maxEntries: 10 }))).toBe("invalid")
    expect(await kind(rt.listFiles("f", "/workspace/missing", { recursive: false, maxEntries: 10 }))).toBe("not_found")
  })
})

describe("list, stat, delete, mkdir", () => {
  it("lists recursively in order, up to max entries (then truncated)", async () => {
    for (const name of ["1", "2", "3"]) await write(`/workspace/l/${name}/f`, new Uint8Array([1, 2]), "overwrite", true)
    await sh(rt, "f", "ln -s /etc /workspace/l/link")
    const all = await run(rt.listFiles("f", "/workspace/l", { recursive: true, maxEntries: 100 }))
    expect(all.truncated).toBe(false)
    expect(all.entries.map((e) => [e.path, e.type])).toEqual([
      ["/workspace/l/1", "directory"],
      ["/workspace/l/1/f", "file"],
      ["/workspace/l/2", "directory"],
      ["/workspace/l/2/f", "file"],
      ["/workspace/l/3", "directory"],
      ["/workspace/l/3/f", "file"],
      ["/workspace/l/link", "symlink"]
    ])
    expect(all.entries[1]).toMatchObject({ sizeBytes: 2 })
    expect(Number.isNaN(Date.parse(all.entries[1]!.modifiedAt))).toBe(false)
    const flat = await run(rt.listFiles("f", "/workspace/l", { recursive: false, maxEntries: 100 }))
    expect(flat.entries.map((e) => e.path)).toEqual(["/workspace/l/1", "/workspace/l/2", "/workspace/l/3", "/workspace/l/link"])
    const cut = await run(rt.listFiles("f", "/workspace/l", { recursive: true, maxEntries: 3 }))
    expect(cut.entries.length).toBe(3)
    expect(cut.truncated).toBe(true)
    // Listing the whole root stays bounded (and does not wander out of the jail).
    const root = await run(rt.listFiles("f", "/", { recursive: true, maxEntries: 500 }))
    expect(root.entries.length).toBe(500)
    expect(root.truncated).toBe(true)
  })

  it("stats files, directories and symlinks; a missing path is none", async () => {
    const file = Option.getOrThrow(await run(rt.statFile("f", "/workspace/l/1/f")))
    expect(file).toMatchObject({ path: "/workspace/l/1/f", type: "file", sizeBytes: 2 })
    expect(file.mode & 0o777).toBe(0o644)
    expect(Option.getOrThrow(await run(rt.statFile("f", "/workspace/l"))).type).toBe("directory")
    expect(Option.getOrThrow(await run(rt.statFile("f", "/workspace/l/link"))).type).toBe("symlink")
    expect(Option.isNone(await run(rt.statFile("f", "/workspace/nothing/here")))).toBe(true)
  })

  it("deletes files and directories (recursive only when asked); a missing path is false", async () => {
    expect(await kind(rt.deleteFile("f", "/workspace/l", { recursive: false }))).toBe("conflict")
    expect(await run(rt.deleteFile("f", "/workspace/l/1/f", { recursive: false }))).toBe(true)
    expect(await run(rt.deleteFile("f", "/workspace/l/1", { recursive: false }))).toBe(true)
    // Deleting a symlink removes the link, not its target.
    expect(await run(rt.deleteFile("f", "/workspace/l/link", { recursive: true }))).toBe(true)
    expect((await sh(rt, "f", "test -f /etc/passwd && echo kept")).stdout).toBe("kept\n")
    expect(await run(rt.deleteFile("f", "/workspace/l", { recursive: true }))).toBe(true)
    expect(await run(rt.deleteFile("f", "/workspace/l", { recursive: true }))).toBe(false)
    expect(Option.isNone(await run(rt.statFile("f", "/workspace/l")))).toBe(true)
    expect(await kind(rt.deleteFile("f", "/", { recursive: true }))).toBe("invalid")
  })

  it("makes directories (with parents; without, an existing one is a conflict)", async () => {
    await run(rt.makeDir("f", "/workspace/d1", { parents: false }))
    expect(await kind(rt.makeDir("f", "/workspace/d1", { parents: false }))).toBe("conflict")
    await run(rt.makeDir("f", "/workspace/d1", { parents: true }))
    expect(await kind(rt.makeDir("f", "/workspace/x/y/z", { parents: false }))).toBe("not_found")
    await run(rt.makeDir("f", "/workspace/x/y/z", { parents: true }))
    expect(Option.getOrThrow(await run(rt.statFile("f", "/workspace/x/y/z"))).type).toBe("directory")
    expect(await kind(rt.makeDir("f", "/workspace/m.txt", { parents: true }))).toBe("conflict")
  })
})
