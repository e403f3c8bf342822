#!/bin/sh
# The test command (README "Tests"): every suite on SQLite, then the db, service and engine-dependent HTTP suites on PostgreSQL
# (TEST_ENGINE=pg: vitest.config.ts starts a real PostgreSQL for the run, one database per DATA_DIR). Both runs
# always happen; the exit status is non-zero when either failed. With VITEST_JSON_REPORT=<file>, the SQLite run
# writes <file> and the PostgreSQL run <file without .json>.pg.json (.ci/run reports both).
set -u
cd "$(dirname "$0")/.."
sh scripts/ensure-deps.sh || exit 1
bun --bun vitest run
sqlite=$?
TEST_ENGINE=pg bun --bun vitest run
pg=$?
[ $sqlite -eq 0 ] && [ $pg -eq 0 ]
