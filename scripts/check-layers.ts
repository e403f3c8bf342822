/**
 * The dependency check (run by the test suite, test/architecture/layers.test.ts; alone: `bun run check:layers`).
 * Layers run one way; each may import only the layers listed for it (and itself):
 *
 *   config     src/Config.ts, DataDir.ts —
 *   domain     src/domain/             — (schemas, ids, errors, principals, token helpers: the lowest layer)
 *   db         src/db/                 domain, config
 *   net        src/net/                domain (the outbound address policy: resolve, check, pin every hop)
 *   runtime    src/runtime/            domain, config, net
 *   contract   src/providers/          domain, config, net, runtime (the provider port: what a provider is, its
 *                                      errors, placement and routing, the registry that holds the plugins)
 *   providers  providers/              domain, config, net, runtime, contract (the plugins and their kit)
 *   services   src/services/           domain, config, db, net, runtime, contract
 *   http       src/http/               domain, config, db, net, runtime, contract, services, assets
 *   cli        src/cli/                domain, config, db, services (the operator's commands)
 *   client     client/                 domain, http (the contract, src/http/Api.ts: the client is derived from it)
 *   entry      bin/                    anything (the program's entries and its command line: the only place that
 *                                      joins the server, the operator's commands, the users' and the emulators)
 *   web        web/src/                domain, contract, providers (the dashboard: types and the catalogue, never code of the server)
 *   assets     web/dist/               — (the dashboard as built: only http serves it)
 *
 * http reaches the database only through services: it may import `src/db/` for types alone (`import type`, or
 * every name marked `type`), never a value (a repository, a transaction, a layer).
 *
 * The SQL packages (`@effect/sql…`, `bun:sqlite`) are imported only in `src/db/`. No source file imports test
 * code (test files, test/, the provider test kits in providers/testing/) or a test runner, and no import cycle
 * exists among the files checked (every file under bin/, src/, providers/, client/src/ and web/src/ but tests).
 */
import * as fs from "node:fs"
import * as path from "node:path"

export type Layer = "config" | "domain" | "db" | "net" | "runtime" | "contract" | "providers" | "services" | "http" | "cli" | "client" | "entry" | "web" | "assets"

const BELOW: Record<Layer, ReadonlyArray<Layer>> = {
  config: [],
  domain: [],
  db: ["domain", "config"],
  net: ["domain"],
  runtime: ["domain", "config", "net"],
  contract: ["domain", "config", "net", "runtime"],
  providers: ["domain", "config", "net", "runtime", "contract"],
  services: ["domain", "config", "db", "net", "runtime", "contract"],
  http: ["domain", "config", "db", "net", "runtime", "contract", "services", "assets"],
  cli: ["domain", "config", "db", "services"],
  client: ["domain", "http"],
  entry: ["domain", "config", "db", "net", "runtime", "contract", "providers", "services", "http", "cli", "client"],
  web: ["domain", "contract", "providers"],
  assets: []
}

/** Packages only one layer may import. */
const PACKAGE_OWNERS: ReadonlyArray<{ readonly test: (specifier: string) => boolean; readonly layer: Layer; readonly what: string }> = [
  { test: (s) => s === "@effect/sql" || s.startsWith("@effect/sql/") || s.startsWith("@effect/sql-") || s === "bun:sqlite", layer: "db", what: "SQL" }
]

export const layerOf = (file: string): Layer | undefined => {
  if (file === "src/Config.ts" || file === "src/DataDir.ts") return "config"
  if (file.startsWith("bin/")) return "entry"
  if (file.startsWith("client/")) return "client"
  if (file.startsWith("web/dist/")) return "assets"
  if (file.startsWith("web/")) return "web"
  const top = file.startsWith("providers/") ? "providers" : file.split("/").slice(0, 2).join("/")
  switch (top) {
    case "src/domain": return "domain"
    case "src/db": return "db"
    case "src/net": return "net"
    case "src/runtime": return "runtime"
    case "src/providers": return "contract"
    case "providers": return "providers"
    case "src/services": return "services"
    case "src/http": return "http"
    case "src/cli": return "cli"
    default: return undefined
  }
}

/** An import of types alone (`import type …`, or every name marked `type`): erased from the program. */
export interface TypeImport {
  readonly typeOnly: string
}

/** A specifier imported for its values (a plain string), or for types alone. */
export type Import = string | TypeImport

/** Files (relative to the root, `/`-separated) and what each imports. */
export type ImportGraph = ReadonlyMap<string, ReadonlyArray<Import>>

const IMPORT = /(?:^|[\s;])(?:import|export)\s+(type\s+)?(?:([\w*{}\s,$]+?)\s+from\s+)?["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g

/** `{ type A, type B as C }`: every name a type. */
const onlyTypes = (clause: string | undefined) => {
  const names = /^\{([^}]*)\}$/.exec(clause?.trim() ?? "")?.[1]?.split(",").map((n) => n.trim()).filter((n) => n !== "")
  return names !== undefined && names.length > 0 && names.every((n) => n.startsWith("type "))
}

/** What a source text imports or re-exports (type-only imports included, marked: they are dependencies too). */
export const importsOf = (text: string): Array<Import> => {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "")
  return [...code.matchAll(IMPORT)].map((m) => {
    const specifier = (m[3] ?? m[4])!
    return m[1] !== undefined || onlyTypes(m[2]) ? { typeOnly: specifier } : specifier
  })
}

const specifierOf = (i: Import) => (typeof i === "string" ? i : i.typeOnly)

/** Test code: test files, the test suite, and the provider test kits (conformance suite, scripted HTTP client). */
const isTestFile = (file: string) => file.endsWith(".test.ts") || file.startsWith("test/") || file.startsWith("providers/testing/")

/** Test runners: never imported by the program. */
const TEST_PACKAGES: ReadonlySet<string> = new Set(["vitest", "@effect/vitest"])

/**
 * Folders of code that is not part of the gateway: deployed elsewhere, not built or type-checked with it (the
 * Cloudflare bridge Worker, which imports `@cloudflare/sandbox` and runs only on Workers).
 */
const NOT_PART_OF_THE_PROGRAM: ReadonlySet<string> = new Set(["providers/cloudflare/bridge"])

/** Reads every checked file under `root`. */
export const readGraph = (root: string): ImportGraph => {
  const graph = new Map<string, ReadonlyArray<Import>>()
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`
      if (entry.isDirectory() && NOT_PART_OF_THE_PROGRAM.has(rel)) continue
      if (entry.isDirectory()) walk(rel)
      else if ((rel.endsWith(".ts") || rel.endsWith(".tsx")) && !isTestFile(rel)) graph.set(rel, importsOf(fs.readFileSync(path.join(root, rel), "utf8")))
    }
  }
  walk("bin")
  walk("src")
  walk("providers")
  walk("client/src")
  walk("web/src")
  return graph
}

/** A relative specifier as a root-relative file, if it names one of the known files (or any file at all). */
const resolve = (from: string, specifier: string, known: ReadonlySet<string>): string => {
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier))
  for (const candidate of [base, `${base}.ts`, `${base}/index.ts`]) if (known.has(candidate)) return candidate
  return base
}

export interface Violation {
  readonly file: string
  readonly message: string
}

/** Every rule broken by the graph: layer order, package owners, test code, files outside a layer, cycles. */
export const analyze = (graph: ImportGraph): Array<Violation> => {
  const known = new Set(graph.keys())
  const violations: Array<Violation> = []
  const edges = new Map<string, Array<string>>()
  for (const [file, specifiers] of graph) {
    const layer = layerOf(file)
    if (layer === undefined) violations.push({ file, message: "is in no layer (see scripts/check-layers.ts)" })
    const targets: Array<string> = []
    for (const imported of specifiers) {
      const specifier = specifierOf(imported)
      const owner = PACKAGE_OWNERS.find((o) => o.test(specifier))
      if (owner !== undefined && layer !== owner.layer) {
        violations.push({ file, message: `imports ${specifier}: ${owner.what} belongs to the ${owner.layer} layer` })
      }
      if (TEST_PACKAGES.has(specifier) || specifier.startsWith("vitest/")) {
        violations.push({ file, message: `imports the test runner ${specifier}` })
        continue
      }
      if (!specifier.startsWith(".")) continue
      const target = resolve(file, specifier, known)
      if (isTestFile(target)) {
        violations.push({ file, message: `imports test code ${target}` })
        continue
      }
      targets.push(target)
      const targetLayer = layerOf(target)
      if (layer === undefined || targetLayer === undefined || targetLayer === layer) continue
      if (!BELOW[layer].includes(targetLayer)) {
        violations.push({ file, message: `(${layer}) imports ${target} (${targetLayer}): ${layer} may import only ${[...BELOW[layer], layer].join(", ")}` })
      } else if (layer === "http" && targetLayer === "db" && typeof imported === "string") {
        violations.push({ file, message: `(http) imports ${target} (db) for a value: handlers call services; http imports src/db for types only` })
      }
    }
    edges.set(file, targets)
  }
  for (const cycle of cyclesOf(edges)) violations.push({ file: cycle[0]!, message: `is in an import cycle: ${[...cycle, cycle[0]].join(" → ")}` })
  return violations
}

/** Strongly connected components with more than one file, or a file importing itself (Tarjan). */
export const cyclesOf = (edges: ReadonlyMap<string, ReadonlyArray<string>>): Array<Array<string>> => {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const cycles: Array<Array<string>> = []
  let next = 0
  const visit = (node: string) => {
    index.set(node, next)
    low.set(node, next++)
    stack.push(node)
    onStack.add(node)
    for (const target of edges.get(node) ?? []) {
      if (!edges.has(target)) continue
      if (!index.has(target)) {
        visit(target)
        low.set(node, Math.min(low.get(node)!, low.get(target)!))
      } else if (onStack.has(target)) low.set(node, Math.min(low.get(node)!, index.get(target)!))
    }
    if (low.get(node) !== index.get(node)) return
    const component: Array<string> = []
    let member: string
    do {
      member = stack.pop()!
      onStack.delete(member)
      component.push(member)
    } while (member !== node)
    if (component.length > 1 || (edges.get(node) ?? []).includes(node)) cycles.push(component.reverse())
  }
  for (const node of [...edges.keys()].sort()) if (!index.has(node)) visit(node)
  return cycles
}

if (import.meta.main) {
  const root = path.resolve(process.argv[2] ?? path.join(import.meta.dirname, ".."))
  const violations = analyze(readGraph(root))
  for (const v of violations) console.error(`${v.file} ${v.message}`)
  console.log(violations.length === 0 ? "layers: ok" : `layers: ${violations.length} violation(s)`)
  process.exit(violations.length === 0 ? 0 : 1)
}
