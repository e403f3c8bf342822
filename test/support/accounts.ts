/** Helpers for account-plane tests: extra users through the CLI, and the server's database (SQLite file or, on the PostgreSQL run, its database) for time travel. */
import { Database } from "bun:sqlite"
import * as fs from "node:fs"
import * as path from "node:path"
import { expect } from "vitest"
import { databaseUrlFor, pgExec, pgQuery } from "./postgres.ts"
import { type api, runCli, openGatewayDatabase } from "./server.ts"

type Http = ReturnType<typeof api>

/** A user with a user token and no organization of their own (operator: `users create` + `tokens create`). */
export const userToken = async (dataDir: string, email: string): Promise<string> => {
  expect((await runCli(dataDir, ["users", "create", "--email", email])).code).toBe(0)
  const issued = await runCli(dataDir, ["tokens", "create", "--email", email, "--json"])
  expect(issued.code).toBe(0)
  return JSON.parse(issued.stdout).token as string
}

/** Users and tokens for several emails at once (each CLI run is a process: side by side is faster). */
export const userTokens = async <E extends string>(dataDir: string, emails: ReadonlyArray<E>): Promise<Record<E, string>> =>
  Object.fromEntries(await Promise.all(emails.map(async (email) => [email, await userToken(dataDir, email)] as const))) as Record<E, string>

/** Invites `email` into `organizationId` and lets them accept by listing organizations; returns their token. */
export const joinAs = async (
  http: Http,
  dataDir: string,
  inviterToken: string,
  organizationId: string,
  email: string,
  role: "admin" | "member",
  existingToken?: string
) => {
  const token = existingToken ?? await userToken(dataDir, email)
  const invite = await http.post(`/v1/organizations/${organizationId}/invitations`, { token: inviterToken, body: { email, role } })
  expect(invite.status).toBe(201)
  const orgs = await http.get("/v1/organizations", { token })
  expect(orgs.body.organizations.map((o: { id: string }) => o.id)).toContain(organizationId)
  return token
}

/**
 * Runs one statement on the running server's database (WAL, busy timeout: safe alongside it). Only for what
 * HTTP cannot do in a test's time, such as letting an invitation or a key expire.
 */
export const execSql = (dataDir: string, statement: string, ...params: Array<string | number | null>) => {
  const url = databaseUrlFor(dataDir)
  if (url !== undefined) return pgExec(url, statement, params)
  const db = openGatewayDatabase(dataDir)
  try {
    db.exec("PRAGMA busy_timeout = 5000")
    return db.query(statement).run(...params).changes
  } finally {
    db.close()
  }
}

export const querySql = <T>(dataDir: string, statement: string, ...params: Array<string | number | null>): Array<T> => {
  const url = databaseUrlFor(dataDir)
  if (url !== undefined) return pgQuery<T>(url, statement, params)
  const db = openGatewayDatabase(dataDir)
  try {
    db.exec("PRAGMA busy_timeout = 5000")
    return db.query(statement).all(...params) as Array<T>
  } finally {
    db.close()
  }
}

export const PAST = "2020-01-01T00:00:00.000Z"
export const NO_SUCH_UUID = "00000000-0000-4000-8000-000000000000"

/**
 * Everything the database holds, as bytes to search (a secret must never be found in it): the SQLite files, or
 * on the PostgreSQL run every table's rows as JSON.
 */
export const databaseBytes = (dataDir: string): Buffer => {
  const url = databaseUrlFor(dataDir)
  if (url !== undefined) {
    const tables = pgQuery<{ table_name: string }>(url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'", [])
    return Buffer.from(tables.map((t) => JSON.stringify(pgQuery(url, `SELECT * FROM ${t.table_name}`, []))).join("\n"))
  }
  return Buffer.concat(fs.readdirSync(dataDir).filter((f) => f.startsWith("gateway.sqlite")).map((f) => fs.readFileSync(path.join(dataDir, f))))
}

/**
 * A copy of operation `templateId`, still running, as `id` (caused by `keyId` when given), with no events: an
 * operation that stays open for as long as a test needs (a real one ends in milliseconds). The test appends its
 * events and ends it with `appendOperationEvent` and `execSql`.
 */
export const insertRunningOperation = (dataDir: string, templateId: string, id: string, keyId?: string) => {
  const row = querySql<Record<string, unknown>>(dataDir, "SELECT * FROM operations WHERE id = ?", templateId)[0]!
  // PostgreSQL's JSON columns come back parsed; they go back as text.
  const stored = Object.fromEntries(Object.entries(row).map(([k, v]) => [k, v !== null && typeof v === "object" ? JSON.stringify(v) : v as string | number | null]))
  const copy: Record<string, string | number | null> = { ...stored, id, state: "running", completed_at: null, error: null, ...(keyId === undefined ? {} : { created_by_key_id: keyId }) }
  if ("last_event_seq" in copy) copy["last_event_seq"] = 0
  delete copy["rowid"] // PostgreSQL's insertion order: the copy gets its own
  const columns = Object.keys(copy)
  execSql(dataDir, `INSERT INTO operations (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`, ...columns.map((c) => copy[c] ?? null))
}

/** Appends event `seq` of type `type` to an operation (as the runner would, from another process: no signal). */
export const appendOperationEvent = (dataDir: string, operationId: string, seq: number, type: string, data: Record<string, unknown> = {}) =>
  execSql(dataDir, "INSERT INTO operation_events (operation_id, seq, type, occurred_at, data) VALUES (?, ?, ?, ?, ?)", operationId, seq, type, new Date().toISOString(), JSON.stringify(data))
