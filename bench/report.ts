/**
 * What `bun run bench` prints: the table of latencies (each with its baseline, the ratio and the target), the notes
 * that are not latencies (throughput, memory), and the PostgreSQL figures beside SQLite's.
 */
import type { PgFigures } from "./postgres.ts"

export const fmt = (ms: number) => `${ms.toFixed(2)} ms`
/** The PostgreSQL figures, each beside SQLite's when given. */
export const printPg = (pg: PgFigures, sqlite?: { readonly createReady: { p50: number }; readonly createWarm?: { p50: number } | undefined; readonly get: { p50: number } }) => {
  const vs = (p50: number, base?: number) => (base === undefined ? "" : `   (SQLite p50 ${fmt(base)}, ${(p50 / base).toFixed(2)}×)`)
  console.log("\nPostgreSQL (DATABASE_URL, a local cluster without fsync)   p50         p90")
  console.log(`${"create → ready (API)".padEnd(58)} ${fmt(pg.createReady.p50).padEnd(11)} ${fmt(pg.createReady.p90).padEnd(11)}${vs(pg.createReady.p50, sqlite?.createReady.p50)}`)
  console.log(`${"  create → ready, a warm jail each (p50 ≤ 40 ms)".padEnd(58)} ${fmt(pg.createWarm.p50).padEnd(11)} ${fmt(pg.createWarm.p90).padEnd(11)}${vs(pg.createWarm.p50, sqlite?.createWarm?.p50)}`)
  console.log(`${"GET /v1/sandboxes/{id} (FastReads)".padEnd(58)} ${fmt(pg.get.p50).padEnd(11)} ${fmt(pg.get.p90).padEnd(11)}${vs(pg.get.p50, sqlite?.get.p50)}`)
  console.log(`${"GET /v1/sandboxes/{id} (full stack)".padEnd(58)} ${fmt(pg.getFullStack.p50).padEnd(11)} ${fmt(pg.getFullStack.p90).padEnd(11)}`)
  console.log(`creates → ready, ${pg.throughput.creates} at 8 in flight: one replica ${pg.throughput.oneReplica.toFixed(1)}/s, two replicas ${pg.throughput.twoReplicas.toFixed(1)}/s`)
}

export const rows: Array<{ name: string; p50: number; p90: number; baseline?: string; baseP50?: number; target?: string }> = []
/** Figures that are not latencies (throughput, memory), printed after the table. */
export const notes: Array<string> = []
export const report = (name: string, s: { p50: number; p90: number }, baseline?: { name: string; s: { p50: number } }, target?: string) =>
  rows.push({ name, p50: s.p50, p90: s.p90, ...(baseline ? { baseline: baseline.name, baseP50: baseline.s.p50 } : {}), ...(target ? { target } : {}) })

/** The table of every row reported, then the notes. */
export const printTable = () => {
  console.log("\nbenchmark                              p50         p90         baseline p50                               ratio   target")
  for (const r of rows) {
    const ratio = r.baseP50 !== undefined ? `${(r.p50 / r.baseP50).toFixed(2)}×` : "–"
    const base = r.baseline !== undefined ? `${fmt(r.baseP50!)} (${r.baseline})` : "–"
    console.log(`${r.name.padEnd(38)} ${fmt(r.p50).padEnd(11)} ${fmt(r.p90).padEnd(11)} ${base.padEnd(42)} ${ratio.padEnd(7)} ${r.target ?? ""}`)
  }
  for (const note of notes) console.log(note)
}
