/**
 * The runtime's own files, decoded when read (Jail.ts JailState, UidLeases.ts Lease): a crash can leave one
 * half-written and a disk can corrupt one. A file that is not of its Schema reads as no file — the state of a jail
 * that is not there, a lease nobody holds — never as a value whose fields are not what their types say.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type JailState, jailDir, readState, writeState } from "../../src/runtime/Jail.ts"
import { UIDS_DIR } from "../../src/runtime/Host.ts"
import { replaceFile } from "../../src/runtime/ReplaceFile.ts"
import { leaseHeldBy, leasesUnder, sweepLeases, updateLease } from "../../src/runtime/UidLeases.ts"
import { tempDataDir } from "../support/server.ts"

const dataDir = tempDataDir("state-files")
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }))

const state: JailState = {
  version: 3,
  id: "s1",
  createdAt: new Date().toISOString(),
  spec: { vcpu: 1, memoryMb: 128, diskMb: 64, internet: true, domains: { mode: "allow", domains: ["example.com"] }, env: { A: "1" }, labels: {} },
  mechanism: "cgroup",
  cgroup: "sandbox-gateway/x/s1",
  hostUid: 200_000,
  bwrapPid: 10,
  bwrapStart: "123",
  childPid: 11,
  childStart: "124",
  slirpPid: null,
  slirpStart: null,
  paused: false
}

describe("a jail's state.json", () => {
  const file = path.join(jailDir(dataDir, "s1"), "state.json")
  fs.mkdirSync(path.dirname(file), { recursive: true })

  it("reads back as written; a field a newer runtime added is kept", () => {
    writeState(dataDir, state)
    expect(readState(dataDir, "s1")).toEqual(state)
    fs.writeFileSync(file, JSON.stringify({ ...state, netns: "sgw-s1" }))
    expect(readState(dataDir, "s1")).toEqual({ ...state, netns: "sgw-s1" })
  })

  it("half-written, of another version or of the wrong shape: read as no state, as a missing file is", () => {
    expect(readState(dataDir, "missing")).toBeUndefined()
    for (const corrupt of [
      JSON.stringify(state).slice(0, 40),
      "null",
      JSON.stringify({ ...state, version: 2 }),
      JSON.stringify({ version: 3, id: "s1" }),
      JSON.stringify({ ...state, bwrapPid: "10" }),
      JSON.stringify({ ...state, spec: { ...state.spec, env: { A: 1 } } })
    ]) {
      fs.writeFileSync(file, corrupt)
      expect(readState(dataDir, "s1"), corrupt).toBeUndefined()
    }
  })
})

describe("a uid lease", () => {
  // A uid above every range a runtime leases from (the default base is far below), so no runtime holds it.
  const uid = 2 ** 31 - 2
  const sandboxes = path.join(dataDir, "sandboxes")
  const dir = path.join(sandboxes, "s1")
  afterAll(() => fs.rmSync(path.join(UIDS_DIR, String(uid)), { force: true }))

  it("reads back as written (a lease from before the launcher started has pid 0 and no start)", () => {
    fs.mkdirSync(UIDS_DIR, { recursive: true })
    updateLease(uid, { dir, pid: 0, start: null })
    expect(leasesUnder(sandboxes)).toEqual([{ uid, lease: { dir, pid: 0, start: null } }])
    fs.writeFileSync(path.join(UIDS_DIR, String(uid)), JSON.stringify({ dir }))
    expect(leasesUnder(sandboxes)).toEqual([{ uid, lease: { dir, pid: 0, start: null } }])
    expect(leaseHeldBy(uid, dir)).toBe(true)
  })

  it("half-written or of the wrong shape: held by nobody, as a missing one", () => {
    for (const corrupt of [`{"dir": "${dir}`, "null", JSON.stringify({ dir: 5 }), JSON.stringify({ dir, pid: "12" }), JSON.stringify({ dir, pid: 1, start: 5 })]) {
      fs.writeFileSync(path.join(UIDS_DIR, String(uid)), corrupt)
      expect(leasesUnder(sandboxes), corrupt).toEqual([])
      expect(leaseHeldBy(uid, dir), corrupt).toBe(false)
    }
  })

  it("a temporary file a killed writer left beside the leases goes at the next sweep; one being written stays", () => {
    const dead = Bun.spawnSync(["true"]).pid
    const left = path.join(UIDS_DIR, `${uid}.${dead}.tmp`)
    const writing = path.join(UIDS_DIR, `${uid}.${process.pid}.tmp`)
    for (const file of [left, writing]) fs.writeFileSync(file, JSON.stringify({ dir }))
    try {
      sweepLeases()
      expect([fs.existsSync(left), fs.existsSync(writing)]).toEqual([false, true])
    } finally {
      for (const file of [left, writing]) fs.rmSync(file, { force: true })
    }
  })
})

describe("replacing a file whole (ReplaceFile.ts)", () => {
  const dir = path.join(dataDir, "replace")
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, "f.json")

  it("creates a file that is not there, replaces one that is, and leaves nothing beside it", () => {
    replaceFile(file, "first", { mode: 0o600 })
    expect(fs.readFileSync(file, "utf8")).toBe("first")
    expect(fs.statSync(file).mode & 0o777).toBe(0o600)
    replaceFile(file, "second", { mode: 0o600 })
    expect(fs.readFileSync(file, "utf8")).toBe("second")
    expect(fs.readdirSync(dir)).toEqual(["f.json"])
  })

  it("a reader in another process finds the old file or the new one, whole, at every moment", async () => {
    // Values of two sizes, so a read of half a write, or of an empty file being written, shows.
    const values = ["a".repeat(3000), "b".repeat(5)]
    replaceFile(file, values[0]!, { mode: 0o600 })
    const reader = Bun.spawn(["bun", "-e", `
      const fs = require("node:fs")
      const ok = new Set(${JSON.stringify(values)})
      const until = Date.now() + 1500
      let reads = 0
      while (Date.now() < until) {
        let text
        try { text = fs.readFileSync(${JSON.stringify(file)}, "utf8") } catch (e) { console.log("missing " + e.code); process.exit(1) }
        if (!ok.has(text)) { console.log("torn " + text.length); process.exit(1) }
        reads++
      }
      console.log("reads " + reads)
    `], { stdout: "pipe" })
    let writes = 0
    while (reader.exitCode === null) {
      replaceFile(file, values[writes++ % 2]!, { mode: 0o600 })
      await Bun.sleep(0)
    }
    const said = (await new Response(reader.stdout).text()).trim()
    expect(said).toMatch(/^reads \d+$/)
    expect(writes).toBeGreaterThan(100)
  })
})
