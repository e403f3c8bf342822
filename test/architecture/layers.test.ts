/**
 * The dependency check (scripts/check-layers.ts) over the real tree, and the check itself on small graphs: a
 * backwards import, SQL outside src/db, test code in a source file, and cycles are each reported.
 */
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { analyze, cyclesOf, importsOf, readGraph } from "../../scripts/check-layers.ts"

const ROOT = path.resolve(import.meta.dirname, "../..")

describe("layers", () => {
  it("the source tree follows the layer rules and has no import cycle", () => {
    expect(analyze(readGraph(ROOT))).toEqual([])
  })

  it("reports an import against the layer order", () => {
    const graph = new Map([
      ["src/domain/A.ts", ["../services/B.ts"]],
      ["src/services/B.ts", ["../domain/A.ts"]],
      ["src/db/C.ts", ["../http/D.ts"]],
      ["src/http/D.ts", []],
      ["src/runtime/E.ts", ["../services/B.ts"]],
      ["providers/x/F.ts", ["../../src/http/D.ts"]],
      ["src/services/G.ts", ["../../providers/e2b/plugin.ts"]],
      ["src/providers/H.ts", ["../../providers/core/wire.ts"]]
    ])
    const messages = analyze(graph).map((v) => `${v.file} ${v.message}`)
    expect(messages.some((m) => m.startsWith("src/domain/A.ts (domain) imports src/services/B.ts"))).toBe(true)
    expect(messages.some((m) => m.startsWith("src/db/C.ts (db) imports src/http/D.ts"))).toBe(true)
    expect(messages.some((m) => m.startsWith("src/runtime/E.ts (runtime) imports src/services/B.ts"))).toBe(true)
    expect(messages.some((m) => m.startsWith("providers/x/F.ts (providers) imports src/http/D.ts"))).toBe(true)
    // The services reach providers through the contract (src/providers); the plugins are handed in by the entry.
    expect(messages.some((m) => m.startsWith("src/services/G.ts (services) imports providers/e2b/plugin.ts"))).toBe(true)
    expect(messages.some((m) => m.startsWith("src/providers/H.ts (contract) imports providers/core/wire.ts"))).toBe(true)
    // services → domain is allowed; the cycle it closes is not.
    expect(messages.some((m) => m.startsWith("src/services/B.ts (services)"))).toBe(false)
    expect(messages.some((m) => m.includes("import cycle"))).toBe(true)
  })

  it("reports SQL outside src/db, test code in a source file and files in no layer", () => {
    const graph = new Map([
      ["src/services/S.ts", ["@effect/sql", "../../test/support/server.ts"]],
      ["src/http/H.ts", ["bun:sqlite"]],
      ["providers/e2b/adapter/index.ts", ["../../testing/conformance.ts", "vitest"]],
      ["src/db/R.ts", ["@effect/sql", "@effect/sql-sqlite-bun", "bun:sqlite"]],
      ["src/elsewhere/X.ts", []]
    ])
    const messages = analyze(graph).map((v) => `${v.file} ${v.message}`)
    expect(messages).toContain("src/services/S.ts imports @effect/sql: SQL belongs to the db layer")
    expect(messages).toContain("src/http/H.ts imports bun:sqlite: SQL belongs to the db layer")
    expect(messages).toContain("src/services/S.ts imports test code test/support/server.ts")
    expect(messages).toContain("providers/e2b/adapter/index.ts imports test code providers/testing/conformance.ts")
    expect(messages).toContain("providers/e2b/adapter/index.ts imports the test runner vitest")
    expect(messages).toContain("src/elsewhere/X.ts is in no layer (see scripts/check-layers.ts)")
    expect(messages.filter((m) => m.startsWith("src/db/R.ts"))).toEqual([])
  })

  it("lets http import src/db for types only: a repository, a transaction or a layer is a service's to use", () => {
    const graph = new Map([
      ["src/http/handlers/H.ts", ["../../db/repos/R.ts", { typeOnly: "../../db/repos/T.ts" }, "../../services/S.ts"]],
      ["src/http/W.ts", [{ typeOnly: "../db/repos/T.ts" }]],
      ["src/services/S.ts", ["../db/repos/R.ts"]],
      ["src/cli/C.ts", ["../db/repos/R.ts"]],
      ["src/db/repos/R.ts", []],
      ["src/db/repos/T.ts", []]
    ])
    const messages = analyze(graph).map((v) => `${v.file} ${v.message}`)
    expect(messages).toEqual([
      "src/http/handlers/H.ts (http) imports src/db/repos/R.ts (db) for a value: handlers call services; http imports src/db for types only"
    ])
  })

  it("tells type-only imports from value imports", () => {
    const text = [
      `import type { A } from "./a.ts"`,
      `import { type B, type C as D } from "./b.ts"`,
      `import { type E, F } from "./e.ts"`,
      `import G from "./g.ts"`,
      `export type { H } from "./h.ts"`,
      `export { I } from "./i.ts"`,
      `import "./side-effect.ts"`,
      `const lazy = import("./lazy.ts")`
    ].join("\n")
    expect(importsOf(text)).toEqual([
      { typeOnly: "./a.ts" },
      { typeOnly: "./b.ts" },
      "./e.ts",
      "./g.ts",
      { typeOnly: "./h.ts" },
      "./i.ts",
      "./side-effect.ts",
      "./lazy.ts"
    ])
  })

  it("finds every cycle, self-imports included, and nothing in an acyclic graph", () => {
    expect(cyclesOf(new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["d"]], ["e", ["a"]]])).map((c) => [...c].sort()))
      .toEqual([["a", "b", "c"], ["d"]])
    expect(cyclesOf(new Map([["a", ["b", "c"]], ["b", ["c"]], ["c", []]]))).toEqual([])
  })
})
