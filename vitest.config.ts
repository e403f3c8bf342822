import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

/**
 * Two runs (scripts/test.sh): SQLite, every suite; then PostgreSQL (TEST_ENGINE=pg), the db and service suites and
 * the engine-dependent HTTP suites (PG_SUITES) against a real PostgreSQL started for the run
 * (test/support/pg-global-setup.ts).
 */
const onPg = process.env["TEST_ENGINE"] === "pg"
const report = process.env["VITEST_JSON_REPORT"]
const reportFile = report === undefined ? undefined : onPg ? report.replace(/(\.json)?$/, ".pg.json") : report

/**
 * On PostgreSQL: the repositories and services (every query of both dialects), and the HTTP suites whose behaviour
 * depends on the engine — replicas sharing one database (revocation and forwarding across them included),
 * fail-over, `db copy`, the account and billing routes' transactions, and the fast reads (their own queries, on a
 * pool of their own). The other HTTP suites check routes above the same repositories (run once, on SQLite).
 */
const PG_SUITES = [
  "test/db/**/*.test.ts",
  "test/services/**/*.test.ts",
  "test/http/replica*.test.ts",
  "test/http/db-copy.test.ts",
  "test/http/accounts.test.ts",
  "test/http/billing.test.ts",
  "test/http/fast-reads.test.ts"
]

/**
 * The files that take longest start first, so the last minutes of a run are not one long file alone on one fork
 * (on a clean checkout vitest has no timings of its own to sort by). Longest first, from the CI's timings.
 */
const LONG_FIRST = [
  "test/docs/docs.test.ts",
  "test/hostile/sandbox-answers.test.ts",
  "test/http/restart-and-cli.test.ts",
  "test/hostile/sandbox.test.ts",
  "test/client/cli.test.ts",
  "test/hostile/endpoints.test.ts",
  "test/e2e/sandbox-api.test.ts",
  "providers/core/kit.test.ts"
]
class LongFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>) {
    const sorted = await super.sort(files)
    const rank = (f: TestSpecification) => {
      const i = LONG_FIRST.findIndex((name) => f.moduleId.endsWith(name))
      return i < 0 ? LONG_FIRST.length : i
    }
    return [...sorted].sort((a, b) => rank(a) - rank(b))
  }
}

export default defineConfig({
  test: {
    include: onPg ? PG_SUITES : ["test/**/*.test.ts", "providers/**/*.test.ts"],
    // The run's own TMPDIR, removed at its end (test/support/tmp-global-setup.ts: first, so the others' temporary
    // files are in it and it is removed last); the program bundled once for the run's servers and CLI runs
    // (test/support/bundle-global-setup.ts).
    globalSetup: ["test/support/tmp-global-setup.ts", "test/support/bundle-global-setup.ts", ...(onPg ? ["test/support/pg-global-setup.ts"] : [])],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each file starts its own server on loopback with its own DATA_DIR; two at a time fits 2 cores.
    pool: "forks",
    // Files of one fork share the module cache: each file importing the whole program again took 200 s of CPU
    // per run. Files keep to their own servers, DATA_DIRs and ports; shared test helpers are stateless or
    // memoised (the test DNS server).
    isolate: false,
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    sequence: { sequencer: LongFirst },
    // .ci/run asks for a JSON report to print its "N passed, M failed" line (one per engine).
    reporters: reportFile !== undefined ? ["default", "json"] : ["default"],
    ...(reportFile !== undefined ? { outputFile: { json: reportFile } } : {})
  }
})
