/**
 * The egress filter's check before each sandbox with internet (NftTables.ts): asked of the kernel through
 * libnftables in the gateway's own process, not by starting nft, and still failing closed — a filter removed since
 * the last sandbox is put back before the next one gets a network. Its own uid base, so its table is its own and
 * no other test's sandboxes lose their filter while this one removes it.
 */
import { afterAll, describe, expect, it } from "vitest"
import { tableName } from "../../src/runtime/Egress.ts"
import { nftTablePresent, nftTablesVia } from "../../src/runtime/NftTables.ts"
import { newRuntime, run } from "./support.ts"

const BASE = 1_300_000_000
const nft = (...args: Array<string>) => Bun.spawnSync(["nft", ...args], { stdio: ["ignore", "pipe", "pipe"] })
const listed = (table: string) => nft("list", "table", "inet", table).exitCode === 0

const { rt, cleanup } = newRuntime("nft-tables", { hostUid: BASE })
afterAll(async () => {
  await cleanup()
  nft("delete", "table", "inet", tableName(BASE))
})

describe("the egress filter's check", () => {
  it("is a library call on a host with nft: a table there is listed, one gone is not, a name that is no table name is never sent", async () => {
    expect(nftTablesVia()).toBe("library")
    const table = `sgw_probe_${process.pid}`
    expect(nft("add", "table", "inet", table).exitCode).toBe(0)
    expect(await nftTablePresent("inet", table)).toBe(true)
    expect(nft("delete", "table", "inet", table).exitCode).toBe(0)
    expect(await nftTablePresent("inet", table)).toBe(false)
    // Read as one name, not as a second command: nothing is listed, and nothing is run.
    expect(nft("add", "table", "inet", table).exitCode).toBe(0)
    expect(await nftTablePresent("inet", `${table}; delete table inet ${table}`)).toBe(false)
    expect(listed(table)).toBe(true)
    nft("delete", "table", "inet", table)
  })

  it("a filter removed since the last sandbox with internet is put back before the next one gets its network", async () => {
    await run(rt.create({ id: "first", vcpu: 1, memoryMb: 128, diskMb: 64, internet: true }))
    expect(listed(tableName(BASE))).toBe(true)
    // As an operator's `nft flush ruleset` would.
    expect(nft("delete", "table", "inet", tableName(BASE)).exitCode).toBe(0)
    await run(rt.create({ id: "second", vcpu: 1, memoryMb: 128, diskMb: 64, internet: true }))
    expect(listed(tableName(BASE))).toBe(true)
  }, 60_000)
})
