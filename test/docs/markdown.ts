/**
 * Reading the project's Markdown for the docs tests: its fenced shell blocks with their markers, its links, and
 * its headings' anchors as a code host makes them.
 *
 * Markers (an HTML comment on the line just before a fence, so it does not show when rendered):
 *   <!-- run -->               the block runs in the test suite (test/docs/docs.test.ts)
 *   <!-- no-run: why -->       it does not (outside README and docs/guide only), and says why
 *   <!-- expect: regex -->     after a run block: a line of what the block printed matches it (one per line)
 */
import * as fs from "node:fs"
import * as path from "node:path"

export const ROOT = path.resolve(import.meta.dirname, "../..")

export interface ShellBlock {
  readonly file: string
  /** 1-based line of the opening fence. */
  readonly line: number
  readonly marker: "run" | "no-run" | undefined
  readonly reason: string | undefined
  readonly code: string
  readonly expect: ReadonlyArray<RegExp>
}

const SHELL = new Set(["sh", "bash", "shell", "console"])

/** Every Markdown file the project ships: README, CONTRIBUTING, ARCHITECTURE and docs/. */
export const markdownFiles = (): ReadonlyArray<string> => {
  const docs: Array<string> = []
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name)
      if (entry.isDirectory()) walk(full)
      else if (entry.name.endsWith(".md")) docs.push(path.relative(ROOT, full))
    }
  }
  walk(path.join(ROOT, "docs"))
  return ["README.md", "CONTRIBUTING.md", "ARCHITECTURE.md", ...docs.sort()]
}

export const shellBlocks = (file: string): ReadonlyArray<ShellBlock> => {
  const lines = fs.readFileSync(path.join(ROOT, file), "utf8").split("\n")
  const blocks: Array<ShellBlock> = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]!)
    if (open === null) continue
    let end = i + 1
    while (end < lines.length && !lines[end]!.startsWith("```")) end++
    if (SHELL.has(open[1]!)) {
      const before = lines[i - 1] ?? ""
      const run = /^<!-- run -->$/.test(before)
      const noRun = /^<!-- no-run: (.+) -->$/.exec(before)
      const expect: Array<RegExp> = []
      for (let j = end + 1; j < lines.length; j++) {
        const m = /^<!-- expect: (.+) -->$/.exec(lines[j]!)
        if (m === null) break
        expect.push(new RegExp(m[1]!, "m"))
      }
      blocks.push({
        file,
        line: i + 1,
        marker: run ? "run" : noRun !== null ? "no-run" : undefined,
        reason: noRun?.[1],
        code: lines.slice(i + 1, end).join("\n"),
        expect
      })
    }
    i = end
  }
  return blocks
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export const anchorsOf = (file: string): ReadonlySet<string> => {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  let fence = false
  for (const line of fs.readFileSync(path.join(ROOT, file), "utf8").split("\n")) {
    if (line.startsWith("```")) fence = !fence
    const m = fence ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (m === null) continue
    const base = m[1]!.toLowerCase().replace(/<[^>]+>/g, "").replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

export interface Link {
  readonly file: string
  readonly line: number
  readonly target: string
}

/** Relative links and images of a file (outside code), `[text](target)`; web and mail links are left out. */
export const linksOf = (file: string): ReadonlyArray<Link> => {
  const links: Array<Link> = []
  let fence = false
  fs.readFileSync(path.join(ROOT, file), "utf8").split("\n").forEach((line, i) => {
    if (line.startsWith("```")) fence = !fence
    if (fence) return
    const text = line.replace(/`[^`]*`/g, "")
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!
      if (!/^(https?:|mailto:)/.test(target)) links.push({ file, line: i + 1, target })
    }
  })
  return links
}

/** Why a link does not resolve, or undefined when it does. */
export const brokenLink = (link: Link): string | undefined => {
  const [target, anchor] = link.target.split("#") as [string, string | undefined]
  const resolved = target === "" ? link.file : path.normalize(path.join(path.dirname(link.file), target))
  if (!fs.existsSync(path.join(ROOT, resolved))) return `${resolved} does not exist`
  if (anchor !== undefined && resolved.endsWith(".md") && !anchorsOf(resolved).has(anchor)) return `${resolved} has no heading #${anchor}`
  return undefined
}
