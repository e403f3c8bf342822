/**
 * Docs that run (README "The docs"): every shell block of the README and of docs/guide/ is executed, in order,
 * one bash session per file, against a real gateway (its own DATA_DIR, emulated providers, a registry on
 * loopback standing in for Docker Hub); a block must exit 0 and print a line matching each of its
 * `<!-- expect: … -->` markers. Elsewhere in docs/ a block runs too unless it says why not (`<!-- no-run: … -->`).
 * And every relative link in the project's Markdown resolves, anchors included.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { alpineLike, startRegistry, type TestRegistry } from "../support/registry.ts"
import { type RunningServer, startServer } from "../support/server.ts"
import { brokenLink, linksOf, markdownFiles, ROOT, type ShellBlock, shellBlocks } from "./markdown.ts"

const METRICS_TOKEN = "docs-metrics-token-0123456789"
const files = markdownFiles()
/** The guide runs whole; the README says why for its set-up commands (CI runs them itself). */
const mustRun = (file: string) => file.startsWith("docs/guide/")

describe("the docs' shell blocks are marked", () => {
  it("every shell block says whether it runs; in docs/guide/ every one runs", () => {
    const problems: Array<string> = []
    for (const file of files) {
      for (const block of shellBlocks(file)) {
        if (block.marker === undefined) problems.push(`${file}:${block.line}: a shell block without <!-- run --> or <!-- no-run: why -->`)
        else if (block.marker === "no-run" && mustRun(file)) problems.push(`${file}:${block.line}: must run (docs/guide/)`)
        else if (block.marker === "no-run" && block.expect.length > 0) problems.push(`${file}:${block.line}: expectations on a block that does not run`)
      }
    }
    expect(problems).toEqual([])
  })

  it("every relative link resolves, anchors included", () => {
    const broken = files.flatMap((file) => linksOf(file).flatMap((link) => {
      const why = brokenLink(link)
      return why === undefined ? [] : [`${link.file}:${link.line}: ${link.target}: ${why}`]
    }))
    expect(broken).toEqual([])
  })
})

let server: RunningServer
let registry: TestRegistry
let scratch: string

beforeAll(async () => {
  registry = startRegistry()
  registry.push("library/python", "3.12-slim", { layers: [[...alpineLike("DocsPython")]] })
  // LOG_LEVEL info: a failing block's message quotes the answers the server gave that were not 2xx or 3xx.
  server = await startServer({ env: { METRICS_TOKEN, REGISTRY_ALLOW_PRIVATE: "true", RUNTIME_WARM_POOL: "1", LOG_LEVEL: "info" } })
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-docs-"))
}, 60_000)
afterAll(async () => {
  await server?.stop()
  registry?.stop()
  // The sessions' homes (a guide installs packages into them: ~180 MB).
  if (scratch !== undefined) fs.rmSync(scratch, { recursive: true, force: true })
})

/** One bash session: the blocks in order, each between markers, stopping at the first that fails. */
const script = (blocks: ReadonlyArray<ShellBlock>) =>
  [
    "set -eo pipefail",
    `cd ${JSON.stringify(ROOT)}`,
    ...blocks.flatMap((b, i) => [`echo "@@block ${i}@@"`, b.code, `echo "@@end ${i}@@"`])
  ].join("\n")

/** Sessions at a time: files run side by side (most of a session waits for sandboxes), a few at once. */
const SESSIONS = 3
let free = SESSIONS
const waiting: Array<() => void> = []
const inSession = async <A>(run: () => Promise<A>): Promise<A> => {
  if (free === 0) await new Promise<void>((resolve) => waiting.push(resolve))
  else free--
  try {
    return await run()
  } finally {
    const next = waiting.shift()
    if (next !== undefined) next()
    else free++
  }
}

/** The server's refusals and failures (its access log's 4xx/5xx records, its warnings and errors), the last ones. */
const serverTrouble = () =>
  server.logs().split(/\n(?=\[\d\d:\d\d:\d\d)/)
    .filter((record) => /http\.status: [45]\d\d|^\[[^\]]+\] (WARN|ERROR|FATAL)/.test(record))
    .slice(-20).map((record) => record.replace(/\n\s+/g, " ").slice(0, 600)).join("\n")

const runFile = async (file: string, blocks: ReadonlyArray<ShellBlock>) => {
  const home = fs.mkdtempSync(path.join(scratch, "home-"))
  const child = Bun.spawn(["bash", "-c", script(blocks)], {
    cwd: ROOT,
    env: {
      ...process.env,
      HOME: home,
      SGW_CONFIG_DIR: path.join(home, "config"),
      GW: server.url,
      DATA_DIR: server.dataDir,
      METRICS_TOKEN,
      IMAGE: `${registry.host}/library/python:3.12-slim`,
      SGW_EMAIL: `docs-${path.basename(file, ".md")}@example.com`
    },
    stdout: "pipe",
    stderr: "pipe"
  })
  const timer = setTimeout(() => child.kill("SIGKILL"), 360_000)
  const [stdout, stderr] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text()])
  const status = await child.exited
  clearTimeout(timer)
  const outputOf = (i: number) => stdout.split(`@@block ${i}@@\n`)[1]?.split(`@@end ${i}@@`)[0]
  blocks.forEach((block, i) => {
    const output = outputOf(i)
    const where = `${file}:${block.line}`
    if (output === undefined || !stdout.includes(`@@end ${i}@@`)) {
      throw new Error(`${where}: the block failed (exit ${status})\n--- stdout\n${output ?? ""}\n--- stderr\n${stderr.slice(-4000)}\n--- the server's last refusals\n${serverTrouble()}`)
    }
    for (const pattern of block.expect) {
      if (!pattern.test(output)) throw new Error(`${where}: no line of its output matches ${pattern}\n--- stdout\n${output}\n--- stderr\n${stderr.slice(-2000)}\n--- the server's last refusals\n${serverTrouble()}`)
    }
  })
  if (status !== 0) throw new Error(`${file}: the session ended with exit ${status}\n--- stderr\n${stderr.slice(-2000)}`)
}

// Each file is its own session, user and HOME: they run side by side, SESSIONS at a time (each session's own
// 360 s starts when it does; the test's timeout covers its wait for a turn).
describe("the docs' shell blocks run", () => {
  for (const file of files) {
    const blocks = shellBlocks(file).filter((b) => b.marker === "run")
    if (blocks.length === 0) continue
    it.concurrent(file, () => inSession(() => runFile(file, blocks)), 900_000)
  }
})
