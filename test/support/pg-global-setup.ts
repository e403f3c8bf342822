/** vitest globalSetup of the PostgreSQL run (TEST_ENGINE=pg): one cluster for the whole run (test/support/postgres.ts). */
import { startPgCluster } from "./postgres.ts"

export default async function setup() {
  const cluster = await startPgCluster()
  process.env["TEST_PG_URL"] = cluster.url
  return () => cluster.stop()
}
