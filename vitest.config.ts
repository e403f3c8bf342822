import { defineConfig } from "vitest/config"

/**
 * Two runs (scripts/test.sh): SQLite, every suite; then PostgreSQL (TEST_ENGINE=pg), the db, service and HTTP
 * suites against a real PostgreSQL started for the run (test/support/pg-global-setup.ts).
 */
const onPg = process.env["TEST_ENGINE"] === "pg"
const report = process.env["VITEST_JSON_REPORT"]
const reportFile = report === undefined ? undefined : onPg ? report.replace(/(\.json)?$/, ".pg.json") : report

export default defineConfig({
  test: {
    include: onPg ? ["test/db/**/*.test.ts", "test/services/**/*.test.ts", "test/http/**/*.test.ts"] : ["test/**/*.test.ts", "providers/**/*.test.ts"],
    ...(onPg ? { globalSetup: ["test/support/pg-global-setup.ts"] } : {}),
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each file starts its own server on loopback with its own DATA_DIR; two at a time fits 2 cores.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    // .ci/run asks for a JSON report to print its "N passed, M failed" line (one per engine).
    reporters: reportFile !== undefined ? ["default", "json"] : ["default"],
    ...(reportFile !== undefined ? { outputFile: { json: reportFile } } : {})
  }
})
