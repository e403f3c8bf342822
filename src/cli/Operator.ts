/**
 * The operator's commands: `bootstrap`, `users`, `tokens`, `credits`, `db copy` (docs/operations/cli.md), reached
 * through the one command line (bin/CommandLine.ts). They open the same database as the server (DATA_DIR, or
 * DATABASE_URL) and do every write in one transaction, so they are safe to run while the server is up. They work
 * only on a database the server has made, unless told `--init`: a run with another DATA_DIR than the server's would
 * otherwise make a second, empty gateway whose keys the server does not know.
 */
import { BunRuntime } from "@effect/platform-bun"
import { ConfigError, Console, Effect, Logger, LogLevel, Schedule, Schema } from "effect"
import { EXPIRES_IN_SECONDS } from "../domain/Accounts.ts"
import { AppConfig, AppConfigLive, dataDirConfig, databaseUrlConfig, displayDatabaseUrl } from "../Config.ts"
import { DatabaseLive, type Repositories } from "../db/Database.ts"
import { copySqliteToPostgres } from "../db/Copy.ts"
import { inTransaction } from "../db/Db.ts"
import { gatewayDatabaseExists } from "../db/Presence.ts"
import { databaseFile } from "../db/Sql.ts"
import { BillingRepo } from "../db/repos/Billing.ts"
import { OrganizationsRepo } from "../db/repos/Organizations.ts"
import { ProjectsRepo } from "../db/repos/Projects.ts"
import { UsersRepo } from "../db/repos/Users.ts"
import { isDatabaseBusy } from "../db/Sql.ts"
import { isoAfter, nowIso } from "../domain/Time.ts"
import { appendEvent } from "../services/Events.ts"
import { accessChanged } from "../services/LiveStreams.ts"
import { grantWelcomeCredit, postLedgerEntry } from "../services/Ledger.ts"
import { createOrganization } from "../services/Organizations.ts"
import { issueLoginLink, LOGIN_LINK_SECONDS } from "../services/Sessions.ts"
import { newUuid, OrganizationId } from "../domain/Ids.ts"

/** A user-facing failure: printed with the usage, exit code 1. */
class CliError extends Error {
  readonly _tag = "CliError"
}

type Flags = Readonly<Record<string, string | true>>

interface Command {
  readonly usage: string
  readonly summary: string
  readonly flags: ReadonlyArray<string>
  /** The flags' own checks (they throw CliError), made before the database is opened: bad input is told as such. */
  readonly check: (flags: Flags) => void
  readonly run: (flags: Flags) => Effect.Effect<void, CliError, Repositories | AppConfig>
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

const required = (flags: Flags, name: string): string => {
  const value = flags[name]
  if (typeof value !== "string" || value.trim() === "") throw new CliError(`--${name} is required`)
  return value.trim()
}

const emailFlag = (flags: Flags): string => {
  const email = required(flags, "email").toLowerCase()
  if (!EMAIL.test(email) || email.length > 320) throw new CliError(`--email must be an email address, got "${email}"`)
  return email
}

const expiresFlag = (flags: Flags): number | null => {
  const value = flags["expires-in"]
  if (value === undefined) return null
  if (typeof value !== "string" || !(value in EXPIRES_IN_SECONDS)) {
    throw new CliError(`--expires-in must be one of ${Object.keys(EXPIRES_IN_SECONDS).join(", ")}`)
  }
  return EXPIRES_IN_SECONDS[value as keyof typeof EXPIRES_IN_SECONDS]
}

const nameFlag = (flags: Flags): string => {
  const name = typeof flags["name"] === "string" ? flags["name"].trim() : "cli"
  if (name.length === 0 || name.length > 120) throw new CliError("--name must be 1-120 characters")
  return name
}

const revokeFlags = (flags: Flags): { readonly id: string | undefined; readonly token: string | undefined } => {
  const id = typeof flags["id"] === "string" ? flags["id"] : undefined
  const token = typeof flags["token"] === "string" ? flags["token"] : undefined
  if (id === undefined && token === undefined) throw new CliError("give --id or --token")
  return { id, token }
}

const grantFlags = (flags: Flags): { readonly org: string; readonly kind: "deposit" | "adjustment"; readonly micro: bigint } => {
  const org = required(flags, "org")
  const kind = flags["kind"] === undefined ? "deposit" : flags["kind"]
  if (kind !== "deposit" && kind !== "adjustment") throw new CliError("--kind must be deposit or adjustment")
  const match = /^(-)?(\d{1,9})(?:\.(\d{1,2}))?$/.exec(required(flags, "amount-usd"))
  if (match === null) throw new CliError("--amount-usd must be dollars with at most 2 decimals, e.g. 25 or 12.50")
  const micro = (BigInt(match[2]!) * 1_000_000n + BigInt((match[3] ?? "").padEnd(2, "0")) * 10_000n) * (match[1] === "-" ? -1n : 1n)
  if (micro === 0n) throw new CliError("--amount-usd must not be zero")
  if (kind === "deposit" && micro < 0n) throw new CliError("a deposit must be positive; use --kind adjustment")
  return { org, kind, micro }
}

const print = (flags: Flags, json: unknown, text: string) => Console.log(flags["json"] === true ? JSON.stringify(json) : text)

class Busy {
  readonly _tag = "Busy"
}

/**
 * One transaction, retried while the database is locked. bun-sqlite begins deferred transactions, and a
 * deferred transaction that reads and then writes while another process (the server, another CLI run) commits
 * gets SQLITE_BUSY at once, whatever the busy timeout; the failed attempt was rolled back, so a retry is safe.
 */
const tx = <A, E>(effect: Effect.Effect<A, E, Repositories>) =>
  inTransaction(effect).pipe(
    Effect.catchAllDefect((d) => (isDatabaseBusy(d) ? Effect.fail(new Busy()) : Effect.die(d))),
    Effect.retry({
      while: (e) => e instanceof Busy,
      schedule: Schedule.exponential("10 millis").pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(12)))
    }),
    Effect.catchIf((e): e is Busy => e instanceof Busy, () => Effect.fail(new CliError("the database stayed locked; try again")))
  )

/** A slug from an email's local part: lowercase, digits and single hyphens. */
const slugFrom = (text: string) => text.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 40) || "default"

const commands: Record<string, Command> = {
  bootstrap: {
    usage: "bootstrap --email <email> [--json]",
    summary: "Create (or reuse) a user, an organization it owns, a project, a user token and a project API key; grant the welcome credit.",
    flags: ["email", "json"],
    check: emailFlag,
    run: (flags) =>
      tx(Effect.gen(function*() {
        const email = emailFlag(flags)
        const { user } = yield* UsersRepo.ensure(email)
        let organizationId = yield* OrganizationsRepo.firstOwnedBy(user.id)
        if (organizationId === undefined) {
          const base = slugFrom(email.split("@")[0] ?? "org")
          const slug = `${base}-${newUuid().slice(0, 8)}`
          const org = yield* createOrganization({ name: `${email.split("@")[0]}'s organization`, slug, ownerId: user.id }).pipe(
            Effect.mapError((e) => new CliError(e.message))
          )
          organizationId = org.id
          yield* appendEvent({ type: "organization.created", organizationId, data: { organization_id: organizationId, name: org.name } })
        }
        yield* grantWelcomeCredit(user.id, organizationId)
        let projectId = (yield* ProjectsRepo.ofOrganization(organizationId))[0]?.id
        if (projectId === undefined) {
          const project = yield* ProjectsRepo.insert({ organizationId, name: "Default project", slug: "default" }).pipe(Effect.mapError((e) => new CliError(e.message)))
          projectId = project.id
          yield* appendEvent({ type: "project.created", organizationId, projectId, data: { project_id: projectId, name: project.name } })
        }
        const token = yield* UsersRepo.issueToken(user.id, "bootstrap", null)
        const key = yield* ProjectsRepo.issueApiKey({ projectId, name: "bootstrap", expiresInSeconds: null, createdBy: user.id })
        const out = { user_id: user.id, user_token: token.token, organization_id: organizationId, project_id: projectId, api_key: key.key }
        yield* print(flags, out, Object.entries(out).map(([k, v]) => `${k}: ${v}`).join("\n"))
      }))
  },
  "users create": {
    usage: "users create --email <email> [--json]",
    summary: "Create a user (no-op if one exists with that email).",
    flags: ["email", "json"],
    check: emailFlag,
    run: (flags) =>
      tx(Effect.gen(function*() {
        const { user, created } = yield* UsersRepo.ensure(emailFlag(flags))
        yield* print(flags, { user_id: user.id, email: user.email, created }, `${created ? "created" : "exists"}: ${user.id} ${user.email}`)
      }))
  },
  "tokens create": {
    usage: "tokens create --email <email> [--name <name>] [--expires-in 1h|1d|7d|30d|90d|180d|1y] [--json]",
    summary: "Issue a user access token (metal_ut_…) for an existing user; it is printed once.",
    flags: ["email", "name", "expires-in", "json"],
    check: (flags) => {
      emailFlag(flags)
      nameFlag(flags)
      expiresFlag(flags)
    },
    run: (flags) =>
      tx(Effect.gen(function*() {
        const email = emailFlag(flags)
        const name = nameFlag(flags)
        const seconds = expiresFlag(flags)
        const user = yield* UsersRepo.findByEmail(email)
        if (user === undefined) return yield* Effect.fail(new CliError(`no user with email ${email}; run: users create --email ${email}`))
        const expiresAt = seconds === null ? null : isoAfter(yield* nowIso, seconds)
        const token = yield* UsersRepo.issueToken(user.id, name, expiresAt)
        yield* print(flags, { token_id: token.id, user_id: user.id, token: token.token, expires_at: token.expires_at }, token.token)
      }))
  },
  "tokens revoke": {
    usage: "tokens revoke (--id <token id> | --token <metal_ut_…>) [--json]",
    summary: "Revoke a user access token; it stops working at once.",
    flags: ["id", "token", "json"],
    check: revokeFlags,
    run: (flags) =>
      tx(Effect.gen(function*() {
        const revoked = yield* UsersRepo.revokeToken(revokeFlags(flags))
        if (!revoked) return yield* Effect.fail(new CliError("no live token matches"))
        yield* print(flags, { revoked: true }, "revoked")
      })).pipe(Effect.zipLeft(accessChanged)) // a replica on PostgreSQL ends the token's streams at once (else within a second)
  },
  "login-link": {
    usage: "login-link --email <email> [--json]",
    summary: `Print a one-time link that signs an existing user in to the dashboard (PUBLIC_URL/login#code=…): valid ${LOGIN_LINK_SECONDS / 60} minutes, once.`,
    flags: ["email", "json"],
    check: emailFlag,
    run: (flags) =>
      Effect.flatMap(AppConfig, ({ publicUrl }) =>
        tx(Effect.gen(function*() {
          const email = emailFlag(flags)
          const user = yield* UsersRepo.findByEmail(email)
          if (user === undefined) return yield* Effect.fail(new CliError(`no user with email ${email}; run: users create --email ${email}`))
          const { code, expiresAt } = yield* issueLoginLink(user.id)
          // The code travels in the fragment: browsers never send it to a server, so no log or proxy sees it.
          const url = `${publicUrl}/login#code=${code}`
          yield* print(flags, { url, user_id: user.id, expires_at: expiresAt }, url)
        })))
  },
  "credits grant": {
    usage: "credits grant --org <organization id> --amount-usd <d.dd> [--kind deposit|adjustment] [--description <text>] [--json]",
    summary: "Add credit to an organization (deposit), or correct its balance (adjustment, may be negative).",
    flags: ["org", "amount-usd", "kind", "description", "json"],
    check: grantFlags,
    run: (flags) =>
      tx(Effect.gen(function*() {
        const { org, kind, micro } = grantFlags(flags)
        if (!Schema.is(OrganizationId)(org) || !(yield* OrganizationsRepo.exists(org))) return yield* Effect.fail(new CliError(`no organization ${org}`))
        const now = yield* nowIso
        const purchaseId = newUuid()
        if (kind === "deposit") {
          yield* BillingRepo.insertPaidGrant({ id: purchaseId, organizationId: org, source: "admin_grant", creditMicrousd: micro, now })
        }
        const description = typeof flags["description"] === "string" ? flags["description"].slice(0, 500) : kind === "deposit" ? "Credit granted by an operator" : "Balance adjustment by an operator"
        const entry = yield* postLedgerEntry({
          organizationId: org,
          kind,
          amountMicrousd: micro,
          description,
          reference: kind === "deposit" ? { type: "purchase", id: purchaseId } : undefined
        })
        yield* appendEvent({ type: "billing.credits_granted", organizationId: org, data: { amount_microusd: micro.toString(), kind } })
        const balance = entry?.balanceMicrousd ?? 0n
        yield* print(flags, { organization_id: org, kind, amount_microusd: micro.toString(), balance_microusd: balance.toString() }, `balance: ${balance} µUSD`)
      }))
  }
}

/** Commands that do not open DATA_DIR's database (they name their databases). */
interface StandaloneCommand {
  readonly usage: string
  readonly summary: string
  readonly flags: ReadonlyArray<string>
  readonly run: (flags: Flags) => Effect.Effect<void, CliError>
}

const standalone: Record<string, StandaloneCommand> = {
  "db copy": {
    usage: "db copy --from <sqlite file> --to <postgres url> [--json]",
    summary: "Copy a stopped single-node gateway's SQLite database (DATA_DIR/gateway.sqlite) into an empty PostgreSQL database, "
      + "then verify each table's row count and checksum (docs/operations/scaling-out.md).",
    flags: ["from", "to", "json"],
    run: (flags) =>
      Effect.gen(function*() {
        const report = yield* copySqliteToPostgres(required(flags, "from"), required(flags, "to")).pipe(Effect.mapError((e) => new CliError(e.message)))
        const width = Math.max(...report.tables.map((t) => t.table.length))
        yield* print(
          flags,
          report,
          [...report.tables.map((t) => `${t.table.padEnd(width)}  ${String(t.rows).padStart(8)} rows  ${t.checksum.slice(0, 16)}  ${t.ok ? "ok" : "MISMATCH"}`),
            report.ok ? "copied and verified" : "verification FAILED"].join("\n")
        )
        if (!report.ok) return yield* Effect.fail(new CliError("the copy does not match the source"))
      })
  }
}

/** Every operator command, for the program's --help. */
export const OPERATOR_COMMANDS: ReadonlyArray<{ readonly usage: string; readonly summary: string }> = [...Object.values(commands), ...Object.values(standalone)]

/** The first words of the operator's commands. */
export const OPERATOR_WORDS: ReadonlySet<string> = new Set([...Object.keys(commands), ...Object.keys(standalone)].map((name) => name.split(" ")[0]!))

/** Why DATA_DIR / DATABASE_URL holds no gateway database, and what to do (run with the server's, or --init). */
const noDatabase = (dataDir: string, databaseUrl: string | undefined) =>
  databaseUrl !== undefined
    ? `DATABASE_URL ${displayDatabaseUrl(databaseUrl)} holds no gateway database (its tables have not been created). `
      + "Run this with the server's DATABASE_URL, or add --init to create a new gateway database there."
    : `DATA_DIR ${dataDir} holds no gateway database (no ${databaseFile(dataDir)})`
      + (process.env["DATA_DIR"] === undefined ? "; DATA_DIR is not set, so ./data of this directory was used" : "")
      + ". Run this with the server's DATA_DIR (the server prints the command when it starts), or add --init to create a new gateway database there."

const parse = (argv: ReadonlyArray<string>) => {
  const words: Array<string> = []
  const flags: Record<string, string | true> = {}
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg.startsWith("--")) {
      const [name, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined]
      const next = argv[i + 1]
      if (inline !== undefined) flags[name] = inline
      else if (name === "json" || name === "help" || next === undefined || next.startsWith("--")) flags[name] = true
      else flags[name] = (i++, next)
    } else words.push(arg)
  }
  return { words, flags }
}

/** `--init`: the database commands may create the gateway database (and DATA_DIR) when there is none. */
const INIT = "init"

const main = (argv: ReadonlyArray<string>, prog: string) => Effect.gen(function*() {
  const { words, flags } = parse(argv)
  const name = [words.slice(0, 2).join(" "), words[0] ?? ""].find((n) => n in commands || n in standalone)
  if (name === undefined) {
    const known = [...Object.keys(commands), ...Object.keys(standalone)].filter((n) => n.startsWith(`${words[0]} `))
    yield* Console.error(`error: unknown command: ${words.join(" ")}\nUsage: ${known.map((n) => `${prog} ${(commands[n] ?? standalone[n])!.usage}`).join("\n       ")}`)
    return 2
  }
  const command = commands[name] ?? standalone[name]!
  const database = commands[name] !== undefined
  const usage = `${prog} ${command.usage}${database ? " [--init]" : ""}`
  if (flags["help"] === true) {
    yield* Console.log(`Usage: ${usage}\n\n${command.summary}${database ? "\n\n--init: create the gateway database if DATA_DIR (or DATABASE_URL) holds none yet; without it, that is an error." : ""}`)
    return 0
  }
  const unknown = Object.keys(flags).filter((f) => !command.flags.includes(f) && !(database && f === INIT))
  if (unknown.length > 0) {
    yield* Console.error(`unknown option${unknown.length > 1 ? "s" : ""}: ${unknown.map((f) => `--${f}`).join(" ")}\nUsage: ${usage}`)
    return 2
  }
  const extra = words.slice(name.split(" ").length)
  const valueless = Object.keys(flags).filter((f) => f !== "json" && f !== INIT && flags[f] === true)
  const problem = extra.length > 0
    ? `unexpected argument${extra.length > 1 ? "s" : ""}: ${extra.join(" ")}`
    : valueless.length > 0
    ? `${valueless.map((f) => `--${f}`).join(", ")} needs a value`
    : undefined
  if (problem !== undefined) {
    yield* Console.error(`${problem}\nUsage: ${usage}`)
    return 2
  }
  const outcome = <R>(run: Effect.Effect<void, CliError, R>, withUsage = true) =>
    Effect.suspend(() => run).pipe(
      Effect.as(0),
      Effect.catchAllDefect((d) => (d instanceof CliError ? Effect.fail(d) : Effect.die(d))),
      Effect.catchAll((e) => Effect.as(Console.error(`error: ${e.message}${withUsage ? `\nUsage: ${usage}` : ""}`), 1))
    )
  const alone = standalone[name]
  if (alone !== undefined) return yield* outcome(Effect.suspend(() => alone.run(flags)))
  // The server's database, or a new one only when asked (--init): looked at before anything is created.
  const present = Effect.gen(function*() {
    const configured = yield* Effect.all([dataDirConfig, databaseUrlConfig]).pipe(Effect.mapError((e) => new CliError(ConfigError.isConfigError(e) ? String(e) : "bad configuration")))
    const exists = yield* gatewayDatabaseExists({ dataDir: configured[0], databaseUrl: configured[1] }).pipe(
      Effect.mapError((e) => new CliError(`cannot reach DATABASE_URL ${displayDatabaseUrl(configured[1] ?? "")}: ${e.message}`))
    )
    if (!exists) return yield* Effect.fail(new CliError(noDatabase(configured[0], configured[1])))
  })
  // The flags first: bad input is told as such, whatever the state of the database.
  if ((yield* outcome(Effect.sync(() => commands[name]!.check(flags)))) !== 0) return 1
  if (flags[INIT] !== true && (yield* outcome(present, false)) !== 0) return 1
  return yield* outcome(Effect.suspend(() => commands[name]!.run(flags))).pipe(Effect.provide(DatabaseLive), Effect.provide(AppConfigLive))
})

/** Runs an operator command (`argv` from its first word); `prog` is how the program was called, for usage lines. */
export const runOperatorCli = (argv: ReadonlyArray<string>, prog: string) =>
  main(argv, prog).pipe(
    Effect.provide(Logger.minimumLogLevel(LogLevel.Warning)),
    Effect.tap((code) => Effect.sync(() => (process.exitCode = code))),
    BunRuntime.runMain
  )

