/**
 * A real PostgreSQL for tests (README "Tests"): `startPgCluster` runs `initdb` into a temporary folder (as the
 * `postgres` user, or `nobody`, when the tests run as root: initdb refuses root) and starts it on a free loopback
 * port, fast and unsafe (no fsync). The PostgreSQL run of the suites (`TEST_ENGINE=pg`, vitest's globalSetup
 * test/support/pg-global-setup.ts) starts one and exports its URL as TEST_PG_URL; then every DATA_DIR a test makes
 * gets its own database (`databaseUrlFor`), which the test server, the CLI and the service layers use.
 */
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

/** The folder with initdb, pg_ctl, postgres and psql: PATH, else Debian's /usr/lib/postgresql/<newest>/bin. */
export const pgBinDir = (): string | undefined => {
  const debian = "/usr/lib/postgresql"
  if (fs.existsSync(debian)) {
    const versions = fs.readdirSync(debian).filter((v) => fs.existsSync(path.join(debian, v, "bin", "initdb"))).sort((a, b) => Number(b) - Number(a))
    if (versions[0] !== undefined) return path.join(debian, versions[0], "bin")
  }
  for (const dir of (process.env["PATH"] ?? "").split(":")) if (dir !== "" && fs.existsSync(path.join(dir, "initdb"))) return dir
  return undefined
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const run = (argv: ReadonlyArray<string>, options: { readonly as?: string | undefined; readonly env?: Record<string, string> } = {}) => {
  const [command, ...args] = options.as === undefined ? argv : ["runuser", "-u", options.as, "--", ...argv]
  const result = spawnSync(command!, args, { encoding: "utf8", env: { ...process.env, ...options.env } })
  if (result.status !== 0) throw new Error(`${argv.join(" ")} failed (${result.status}): ${result.stderr}${result.stdout}`)
  return result.stdout
}

/** The unprivileged user the cluster runs as when we are root. */
const clusterUser = (): string | undefined => {
  if (process.getuid?.() !== 0) return undefined
  return spawnSync("id", ["-u", "postgres"]).status === 0 ? "postgres" : "nobody"
}

export interface PgCluster {
  /** A superuser URL to the `postgres` database. */
  readonly url: string
  readonly stop: () => void
}

export const startPgCluster = async (): Promise<PgCluster> => {
  const bin = pgBinDir()
  if (bin === undefined) throw new Error("PostgreSQL is not installed (scripts/ensure-deps.sh installs Debian's postgresql)")
  const user = clusterUser()
  // A folder the cluster's user can reach (a root-only /tmp is not one).
  const bases = [os.tmpdir(), "/var/tmp", "/dev/shm"]
  const base = user === undefined ? bases[0]! : bases.find((b) => spawnSync("runuser", ["-u", user, "--", "test", "-x", b]).status === 0) ?? bases[0]!
  const root = fs.mkdtempSync(path.join(base, "sgw-pg-"))
  const data = path.join(root, "data")
  if (user !== undefined) run(["chown", user, root])
  fs.chmodSync(root, 0o700)
  const port = await freePort()
  const settings = [
    `-p ${port}`, `-k ${root}`, "-c listen_addresses=127.0.0.1", "-c fsync=off", "-c synchronous_commit=off",
    "-c full_page_writes=off", "-c max_connections=400", "-c shared_buffers=64MB"
  ].join(" ")
  try {
    run([path.join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "-N"], { as: user })
    run([path.join(bin, "pg_ctl"), "-D", data, "-o", settings, "-l", path.join(root, "log"), "-w", "-t", "60", "start"], { as: user })
  } catch (e) {
    fs.rmSync(root, { recursive: true, force: true })
    throw e
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: () => {
      const argv = [path.join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "stop"]
      if (user === undefined) spawnSync(argv[0]!, argv.slice(1))
      else spawnSync("runuser", ["-u", user, "--", ...argv])
      fs.rmSync(root, { recursive: true, force: true })
    }
  }
}

const psql = (url: string, statement: string): string => {
  const bin = pgBinDir()
  const command = bin !== undefined && fs.existsSync(path.join(bin, "psql")) ? path.join(bin, "psql") : "psql"
  return run([command, url, "-v", "ON_ERROR_STOP=1", "-X", "-q", "-A", "-t", "-c", statement])
}

const created = new Set<string>()

/** The test cluster's URL (TEST_PG_URL) with another database name. */
const withDatabase = (base: string, name: string) => {
  const url = new URL(base)
  url.pathname = `/${name}`
  return url.toString()
}

/**
 * On the PostgreSQL run: a database of its own for this DATA_DIR (created on first use), as a URL. Otherwise
 * undefined (SQLite in the DATA_DIR).
 */
export const databaseUrlFor = (dataDir: string): string | undefined => {
  const base = process.env["TEST_PG_URL"]
  if (base === undefined || base === "") return undefined
  const name = `gw_${createHash("sha256").update(path.resolve(dataDir)).digest("hex").slice(0, 24)}`
  if (!created.has(name)) {
    const exists = psql(base, `SELECT 1 FROM pg_database WHERE datname = '${name}'`).trim() === "1"
    if (!exists) {
      try {
        psql(base, `CREATE DATABASE ${name}`)
      } catch (e) {
        if (!String(e).includes("already exists")) throw e
      }
    }
    created.add(name)
  }
  return withDatabase(base, name)
}

/** `{ DATABASE_URL }` for a child process on this DATA_DIR on the PostgreSQL run; `{}` otherwise. */
export const databaseEnv = (dataDir: string): Record<string, string> => {
  const url = databaseUrlFor(dataDir)
  return url === undefined ? {} : { DATABASE_URL: url }
}

/** Whether this is the PostgreSQL run of the suites. */
export const onPostgres = (): boolean => (process.env["TEST_PG_URL"] ?? "") !== ""

/** A value as a SQL literal (tests only: statements with `?` placeholders run through psql). */
const literal = (value: string | number | null): string =>
  value === null ? "NULL" : typeof value === "number" ? String(value) : `'${value.replaceAll("'", "''")}'`

const inline = (statement: string, params: ReadonlyArray<string | number | null>) => {
  let i = 0
  return statement.replace(/\?/g, () => literal(params[i++] ?? null))
}

/** Runs a statement on the database; returns how many rows it changed. */
export const pgExec = (url: string, statement: string, params: ReadonlyArray<string | number | null>): number => {
  const out = psql(url, `WITH changed AS (${inline(statement, params)} RETURNING 1) SELECT count(*) FROM changed`)
  return Number(out.trim())
}

/** Runs a query on the database; returns its rows as JSON objects. */
export const pgQuery = <T>(url: string, statement: string, params: ReadonlyArray<string | number | null>): Array<T> => {
  const out = psql(url, `SELECT coalesce(json_agg(q), '[]'::json) FROM (${inline(statement, params)}) q`)
  return JSON.parse(out.trim()) as Array<T>
}
