/**
 * vitest globalSetup of every run: the program bundled once (`bun build` of bin/main.ts and bin/cli.ts, as the
 * compiled binary bundles it), so the suite's ~150 gateway starts and ~200 CLI runs load one pre-transpiled file
 * instead of transpiling and resolving ~1,400 modules each time (measured: 5.5 s of CPU per start from source,
 * 3.2 s from the bundle; the suite is CPU-bound on CI's 2 cores). test/support/server.ts runs the bundle when
 * SGW_TEST_BUNDLE names it; a few tests still start the source (`bun run bin/main.ts`) on purpose.
 *
 * The files go to `<checkout>/.tmp/` (ignored by git): one level under the checkout, as bin/ is, so the program's
 * idea of its checkout (bin/CommandLine.ts: `bun run cli` in the hints it prints) is the same as from source.
 */
import * as fs from "node:fs"
import * as path from "node:path"

const ROOT = path.resolve(import.meta.dirname, "../..")

export default async function setup() {
  // SGW_TEST_FROM_SOURCE=1: every server and CLI run from the source instead (a comparison, or a bundling problem).
  if (process.env["SGW_TEST_FROM_SOURCE"] === "1") return
  const out = path.join(ROOT, ".tmp")
  // Built aside and renamed into place: another run in this checkout may be starting from the previous bundle.
  fs.mkdirSync(out, { recursive: true })
  const staging = fs.mkdtempSync(path.join(out, "bundle-"))
  try {
    const built = await Bun.build({ entrypoints: [path.join(ROOT, "bin/main.ts"), path.join(ROOT, "bin/cli.ts")], target: "bun", outdir: staging })
    if (!built.success) throw new Error(`bundling the program failed:\n${built.logs.map(String).join("\n")}`)
    for (const name of ["main.js", "cli.js"]) fs.renameSync(path.join(staging, name), path.join(out, name))
  } finally {
    fs.rmSync(staging, { recursive: true, force: true })
  }
  process.env["SGW_TEST_BUNDLE"] = out
}
