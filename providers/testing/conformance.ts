/**
 * One conformance suite for every adapter (reference/providers.md §5, DESIGN §4), driven by its declared
 * capabilities: what is declared must work, and what is not must fail with kind `unsupported`.
 *
 * - create twice with one sandbox id → the same resource; inspect says running; reconcileCreate finds it, and
 *   returns null for an id that never existed;
 * - files: all 256 byte values round-trip, UTF-8 round-trips, ranged reads, `create` refuses an existing path,
 *   parents are created only when asked (where declared), list, delete twice (true, then false), a deleted file
 *   reads as not_found;
 * - exec: seq contiguous from 0 with the exit last, stdout/stderr kept apart, cwd and environment applied, a
 *   non-zero exit code, the same events when a position is read again;
 * - the same situation, the same failure on every provider: a missing working directory (`isCwdMissing`, the
 *   gateway's `cwd_not_found`), a missing file (`fileReasonOf` is `not_found`, the gateway's `file_not_found`), a
 *   non-zero exit (an exit event, the gateway's `process_exit_nonzero`);
 * - cancel (a cancelled exit), pause/resume (exec works again after), endpoints (the URL reaches a server in the
 *   sandbox; revoke stops it and is idempotent) — each where declared;
 * - cost is null or a non-negative cumulative amount; destroy twice succeeds, then inspect says absent and
 *   reconcileCreate finds nothing.
 *
 * `make` builds the adapter under test (typically pointed at its emulator): either a scoped Effect (its scope is
 * closed after the suite) or a function returning the provider and a teardown.
 */
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type LocalRuntimeHandle, makeLocalRuntime } from "../../src/runtime/LocalRuntimeLive.ts"
import { isCwdMissing } from "../../src/providers/cwd.ts"
import { fileReasonOf } from "../../src/providers/errors.ts"
import type { ExecEvent } from "../../src/runtime/LocalRuntime.ts"
import type { CreateInput, ProviderError, ProviderSandbox, SandboxProvider } from "../../src/providers/Provider.ts"

export type ConformanceTarget =
  | Effect.Effect<SandboxProvider, unknown, Scope.Scope>
  | (() => Promise<{ readonly provider: SandboxProvider; readonly teardown: () => Promise<void> }>)

/**
 * A target over an emulator: a fresh DATA_DIR and local runtime, the emulator on them, the adapter pointed at it;
 * the teardown stops the emulator and removes every jail it made.
 */
export const emulatedTarget = <E extends { readonly stop: () => void }>(
  label: string,
  start: (dataDir: string, runtime: LocalRuntimeHandle) => E,
  adapter: (emulator: E) => SandboxProvider
) =>
async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `sgw-${label}-`))
  const runtime = makeLocalRuntime(dataDir)
  const emulator = start(dataDir, runtime)
  return {
    provider: adapter(emulator),
    emulator,
    teardown: async () => {
      emulator.stop()
      await Effect.runPromise(runtime.reap(new Set()))
    }
  }
}

const TEST_TIMEOUT_MS = 60_000

const randomSuffix = () => crypto.randomUUID().replaceAll("-", "").slice(0, 24)

export const conformanceInput = (sandboxId: string): CreateInput => ({
  sandboxId,
  organizationId: "00000000-0000-4000-8000-000000000000",
  projectId: "prj_conformance",
  source: { kind: "environment", environment: "metal/base", version: "latest" },
  resources: { vcpu: 1, memoryMb: 512, architecture: "any" },
  lifecycle: { runtimeTimeoutSeconds: 600, onRuntimeTimeout: "destroy", onIdleTimeout: "destroy" },
  internetAccess: false,
  providerOptions: {},
  environment: { CONFORMANCE_SANDBOX: "yes" },
  metadata: { suite: "conformance" }
})

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>): Promise<ProviderError> => {
  const exit = await Effect.runPromise(Effect.either(effect))
  if (exit._tag === "Right") throw new Error(`expected a failure, got ${JSON.stringify(exit.right, (_k, v) => (typeof v === "bigint" ? String(v) : v))}`)
  return exit.left
}
const expectUnsupported = async <A>(effect: Effect.Effect<A, ProviderError>, what: string) =>
  expect((await failureOf(effect)).kind, what).toBe("unsupported")

const text = (events: ReadonlyArray<ExecEvent>, type: "stdout" | "stderr") =>
  Buffer.concat(events.flatMap((e) => (e.type === type ? [Buffer.from(e.data)] : []))).toString("utf8")

/** Polls execEvents from the last position until the exit event arrives. */
const collect = async (provider: SandboxProvider, sandbox: ProviderSandbox, executionId: string, timeoutMs = 30_000) => {
  const events: Array<ExecEvent> = []
  const deadline = Date.now() + timeoutMs
  while (!events.some((e) => e.type === "exit")) {
    if (Date.now() > deadline) throw new Error(`no exit within ${timeoutMs} ms (got ${events.length} events)`)
    const batch = await run(provider.execEvents(sandbox, executionId, events.length))
    for (const e of batch) {
      expect(e.seq, "seq is contiguous").toBe(events.length)
      events.push(e)
    }
    if (batch.length === 0) await Bun.sleep(20)
  }
  return events
}

const execToExit = async (provider: SandboxProvider, sandbox: ProviderSandbox, command: ReadonlyArray<string>, extra: { cwd?: string; environment?: Record<string, string> } = {}) => {
  const { executionId } = await run(provider.exec(sandbox, {
    command,
    ...extra,
    timeoutSeconds: 60,
    maxOutputBytes: 1 << 20,
    processId: `proc_${randomSuffix()}${randomSuffix().slice(0, 8)}`
  }))
  return { executionId, events: await collect(provider, sandbox, executionId) }
}

export const conformance = (name: string, make: ConformanceTarget) =>
  describe(`${name}: provider conformance`, () => {
    let provider: SandboxProvider
    let teardown: () => Promise<void> = async () => {}
    let sandbox: ProviderSandbox
    const sandboxId = `sbx_conf${randomSuffix()}`

    beforeAll(async () => {
      if (Effect.isEffect(make)) {
        const scope = await run(Scope.make())
        teardown = () => run(Scope.close(scope, Exit.void))
        provider = await run(Scope.extend(make as Effect.Effect<SandboxProvider, unknown, Scope.Scope>, scope))
      } else {
        const made = await make()
        provider = made.provider
        teardown = made.teardown
      }
      sandbox = await run(provider.create(conformanceInput(sandboxId)))
    }, TEST_TIMEOUT_MS)

    afterAll(async () => {
      if (provider !== undefined && sandbox !== undefined) await run(Effect.ignore(provider.destroy(sandbox)))
      await teardown()
    }, TEST_TIMEOUT_MS)

    it("create is idempotent per sandbox id; reconcile finds it and nothing for an unknown id", async () => {
      const again = await run(provider.create(conformanceInput(sandboxId)))
      expect(again.resourceId).toBe(sandbox.resourceId)
      expect(await run(provider.inspect(sandbox))).toBe("running")
      expect((await run(provider.reconcileCreate(sandboxId)))?.resourceId).toBe(sandbox.resourceId)
      expect(await run(provider.reconcileCreate(`sbx_never${randomSuffix()}`))).toBeNull()
      expect(sandbox.resolvedResources.vcpu).toBeGreaterThan(0)
      expect(sandbox.resolvedResources.memoryMb).toBeGreaterThan(0)
    }, TEST_TIMEOUT_MS)

    it("files: binary and UTF-8 round trips, ranges, modes, parents, list, idempotent delete", async () => {
      const files = provider.capabilities.files
      const dir = `/workspace/conf-${randomSuffix().slice(0, 8)}`
      if (files === null) {
        await expectUnsupported(provider.readFile(sandbox, { path: `${dir}/x`, offsetBytes: 0, maxBytes: 1 }), "readFile")
        await expectUnsupported(provider.writeFile(sandbox, { path: `${dir}/x`, data: new Uint8Array(1), mode: "overwrite", createParents: true }), "writeFile")
        await expectUnsupported(provider.listFiles(sandbox, { path: dir, recursive: false, maxEntries: 10 }), "listFiles")
        await expectUnsupported(provider.deleteFile(sandbox, { path: `${dir}/x`, recursive: false }), "deleteFile")
        return
      }
      const mode = files.writeModes.includes("overwrite") ? "overwrite" : "create"
      const bytes = new Uint8Array(256).map((_, i) => i)
      // Parents: created when asked (where declared); a write into a missing directory fails otherwise.
      let base = "/workspace"
      if (files.createParents) {
        const refused = await failureOf(provider.writeFile(sandbox, { path: `${dir}/nested/a.bin`, data: bytes, mode, createParents: false }))
        expect(refused.kind).not.toBe("unsupported")
        await run(provider.writeFile(sandbox, { path: `${dir}/nested/a.bin`, data: bytes, mode, createParents: true }))
        base = `${dir}/nested`
      } else {
        base = `/workspace`
      }
      const binPath = `${base}/bytes-${randomSuffix().slice(0, 6)}.bin`
      const written = await run(provider.writeFile(sandbox, { path: binPath, data: bytes, mode, createParents: false }))
      expect(written).toEqual({ bytesWritten: 256, created: true })
      const read = await run(provider.readFile(sandbox, { path: binPath, offsetBytes: 0, maxBytes: 4096 }))
      expect([...read.data]).toEqual([...bytes])
      expect(read).toMatchObject({ offsetBytes: 0, sizeBytes: 256, eof: true })
      const range = await run(provider.readFile(sandbox, { path: binPath, offsetBytes: 10, maxBytes: 20 }))
      expect([...range.data]).toEqual([...bytes.slice(10, 30)])
      expect(range).toMatchObject({ offsetBytes: 10, sizeBytes: 256, eof: false })

      const utf8 = "héllo wörld ✓ 🚀 — 日本語\n"
      const utfPath = `${base}/utf8-${randomSuffix().slice(0, 6)}.txt`
      await run(provider.writeFile(sandbox, { path: utfPath, data: new TextEncoder().encode(utf8), mode, createParents: false }))
      expect(new TextDecoder().decode((await run(provider.readFile(sandbox, { path: utfPath, offsetBytes: 0, maxBytes: 4096 }))).data)).toBe(utf8)

      if (files.writeModes.includes("create")) {
        expect((await failureOf(provider.writeFile(sandbox, { path: utfPath, data: bytes, mode: "create", createParents: false }))).kind).not.toBe("unsupported")
      }
      if (files.writeModes.includes("overwrite")) {
        expect(await run(provider.writeFile(sandbox, { path: utfPath, data: new TextEncoder().encode("x"), mode: "overwrite", createParents: false }))).toEqual({ bytesWritten: 1, created: false })
        expect((await run(provider.readFile(sandbox, { path: utfPath, offsetBytes: 0, maxBytes: 10 }))).sizeBytes).toBe(1)
      }
      for (const m of ["create", "overwrite", "append"] as const) {
        if (!files.writeModes.includes(m)) {
          await expectUnsupported(provider.writeFile(sandbox, { path: `${base}/m-${m}`, data: bytes, mode: m, createParents: false }), `write mode ${m}`)
        }
      }

      if (files.list) {
        const listed = await run(provider.listFiles(sandbox, { path: base, recursive: false, maxEntries: 1000 }))
        const paths = listed.entries.map((e) => e.path)
        expect(paths).toContain(binPath)
        expect(paths).toContain(utfPath)
        expect(listed.entries.find((e) => e.path === binPath)).toMatchObject({ type: "file", sizeBytes: 256 })
        const one = await run(provider.listFiles(sandbox, { path: base, recursive: false, maxEntries: 1 }))
        expect(one.entries).toHaveLength(1)
        expect(one.truncated).toBe(true)
      } else {
        await expectUnsupported(provider.listFiles(sandbox, { path: base, recursive: false, maxEntries: 10 }), "listFiles")
      }

      if (files.delete) {
        expect(await run(provider.deleteFile(sandbox, { path: utfPath, recursive: false }))).toEqual({ deleted: true })
        expect(await run(provider.deleteFile(sandbox, { path: utfPath, recursive: false }))).toEqual({ deleted: false })
        expect((await failureOf(provider.readFile(sandbox, { path: utfPath, offsetBytes: 0, maxBytes: 10 }))).kind).toBe("not_found")
      } else {
        await expectUnsupported(provider.deleteFile(sandbox, { path: utfPath, recursive: false }), "deleteFile")
      }
    }, TEST_TIMEOUT_MS)

    it("exec: contiguous sequences with the exit last, streams apart, cwd and environment, exit codes", async () => {
      const proc = provider.capabilities.process
      if (proc === null) {
        await expectUnsupported(provider.exec(sandbox, { command: ["true"], timeoutSeconds: 1, maxOutputBytes: 1, processId: "proc_x" }), "exec")
        await expectUnsupported(provider.execEvents(sandbox, "x", 0), "execEvents")
        await expectUnsupported(provider.cancelExec(sandbox, "x"), "cancelExec")
        return
      }
      const ok = await execToExit(provider, sandbox, ["sh", "-c", "echo out; echo err >&2; echo more"])
      expect(ok.events.map((e) => e.seq)).toEqual(ok.events.map((_, i) => i))
      expect(ok.events.filter((e) => e.type === "exit")).toHaveLength(1)
      expect(ok.events.at(-1)).toMatchObject({ type: "exit", exitCode: 0, cancelled: false, timedOut: false, outputTruncated: false })
      expect(text(ok.events, "stdout")).toBe("out\nmore\n")
      expect(text(ok.events, "stderr")).toBe("err\n")
      // Reading the same position again gives the same events (what a restarted gateway does).
      const last = ok.events.length - 1
      const again = await run(provider.execEvents(sandbox, ok.executionId, last))
      expect(again).toEqual([ok.events[last]])

      const failed = await execToExit(provider, sandbox, ["sh", "-c", "exit 42"])
      expect(failed.events.at(-1)).toMatchObject({ type: "exit", exitCode: 42, cancelled: false })

      const env = await execToExit(provider, sandbox, ["sh", "-c", "pwd; echo \"$GREETING\" \"$CONFORMANCE_SANDBOX\""], { cwd: "/tmp", environment: { GREETING: "hi there" } })
      expect(text(env.events, "stdout")).toBe("/tmp\nhi there yes\n")
    }, TEST_TIMEOUT_MS)

    it("the same situation fails the same way on every provider: a missing working directory, a missing file, a non-zero exit", async () => {
      const proc = provider.capabilities.process
      if (proc !== null) {
        // However the provider says it (refusing the start, or a shell's `cd` failing): the gateway's cwd_not_found.
        const cwd = `/nonexistent-${randomSuffix().slice(0, 8)}`
        const started = await run(Effect.either(provider.exec(sandbox, { command: ["true"], cwd, timeoutSeconds: 60, maxOutputBytes: 1024, processId: `proc_cwd${randomSuffix()}` })))
        const failure = started._tag === "Left"
          ? started.left
          : await failureOf(Effect.gen(function*() {
            for (let seq = 0; ;) {
              const events = yield* provider.execEvents(sandbox, started.right.executionId, seq)
              seq += events.length
              const exit = events.find((e) => e.type === "exit")
              if (exit !== undefined) return exit
              if (events.length === 0) yield* Effect.sleep("20 millis")
            }
          }))
        expect(isCwdMissing(failure), `${failure.kind}: ${failure.message}`).toBe(true)
        // A non-zero exit is the command's own: an exit event with its code, never a failure of the call.
        expect((await execToExit(provider, sandbox, ["sh", "-c", "exit 7"])).events.at(-1)).toMatchObject({ type: "exit", exitCode: 7 })
      }
      if (provider.capabilities.files?.read === true) {
        const missing = await failureOf(provider.readFile(sandbox, { path: `/workspace/missing-${randomSuffix().slice(0, 8)}`, offsetBytes: 0, maxBytes: 16 }))
        expect(fileReasonOf(missing), `${missing.kind}: ${missing.message}`).toBe("not_found")
      }
    }, TEST_TIMEOUT_MS)

    it("cancel where declared (a cancelled exit), unsupported otherwise", async () => {
      const proc = provider.capabilities.process
      if (proc === null) return // covered by the exec test
      const { executionId } = await run(provider.exec(sandbox, { command: ["sleep", "60"], timeoutSeconds: 120, maxOutputBytes: 100, processId: `proc_cancel${randomSuffix()}` }))
      if (!proc.cancel) {
        await expectUnsupported(provider.cancelExec(sandbox, executionId), "cancelExec")
        return
      }
      await Bun.sleep(100)
      expect((await run(provider.cancelExec(sandbox, executionId))).cancelled).toBe(true)
      const events = await collect(provider, sandbox, executionId, 15_000)
      expect(events.at(-1)).toMatchObject({ type: "exit", cancelled: true })
      // Cancelling what already ended is not an error.
      await run(provider.cancelExec(sandbox, executionId))
    }, TEST_TIMEOUT_MS)

    it("news where the provider pushes it (execNews): a wait on a quiet command ends at its output (where it streams) and at its end, not before", async () => {
      const execNews = provider.execNews
      if (provider.capabilities.process === null || execNews === undefined) return
      // Its output comes no sooner than 1.5 s after the exec is asked for, its end no sooner than 4.5 s.
      const askedAt = Date.now()
      const { executionId } = await run(provider.exec(sandbox, { command: ["sh", "-c", "sleep 1.5; echo late; sleep 3"], timeoutSeconds: 60, maxOutputBytes: 1024, processId: `proc_news${randomSuffix()}` }))
      const waitFor = () => {
        const state = { done: false }
        const promise = run(execNews(sandbox, executionId, 60_000)).then(() => void (state.done = true))
        return { promise, state }
      }
      /** A wait must not end for 700 ms, or until shortly before `news` (ms after the ask) if that comes sooner: a loaded machine's delays are not the wait's. */
      const notBefore = async (wait: ReturnType<typeof waitFor>, news: number) => {
        const quiet = Math.min(700, askedAt + news - 200 - Date.now())
        if (quiet <= 0) return
        await Bun.sleep(quiet)
        expect(wait.state.done, `a wait ended within ${quiet} ms, with nothing new`).toBe(false)
      }
      const first = waitFor()
      await notBefore(first, 1_500)
      // Past its output, before its end: what a reader gets now tells a provider whose output comes only with its end.
      await Bun.sleep(1300)
      const midway = await run(provider.execEvents(sandbox, executionId, 0))
      const doneMidway = first.state.done
      await first.promise
      let events: ReadonlyArray<ExecEvent> = []
      const deadline = Date.now() + 10_000
      while (events.length === 0 && Date.now() < deadline) events = await run(provider.execEvents(sandbox, executionId, 0))
      const texts = (list: ReadonlyArray<ExecEvent>) => list.map((e) => (e.type === "exit" ? "exit" : Buffer.from(e.data).toString()))
      if (events.at(-1)?.type === "exit") {
        // Its output came only with its end (Runloop): that end is its one piece of news, and nothing came before it.
        expect([texts(midway), doneMidway]).toEqual([[], false])
        expect(texts(events)).toEqual(["late\n", "exit"])
        expect(events.at(-1)).toMatchObject({ type: "exit", exitCode: 0 })
        return
      }
      expect(texts(events)).toEqual(["late\n"])
      const second = waitFor()
      await notBefore(second, 4_500)
      await second.promise
      const all = await collect(provider, sandbox, executionId, 15_000)
      expect(all.map((e) => e.type)).toEqual(["stdout", "exit"])
      expect(all.at(-1)).toMatchObject({ type: "exit", exitCode: 0 })
    }, TEST_TIMEOUT_MS)

    it("pause and resume where declared, unsupported otherwise", async () => {
      const caps = provider.capabilities
      if (!caps.pause) await expectUnsupported(provider.pause(sandbox), "pause")
      if (!caps.resume) await expectUnsupported(provider.resume(sandbox), "resume")
      if (!caps.pause || !caps.resume) return
      await run(provider.pause(sandbox))
      expect(await run(provider.inspect(sandbox))).toBe("paused")
      await run(provider.pause(sandbox)) // idempotent
      await run(provider.resume(sandbox))
      expect(await run(provider.inspect(sandbox))).toBe("running")
      await run(provider.resume(sandbox)) // idempotent
      if (caps.process !== null) expect((await execToExit(provider, sandbox, ["true"])).events.at(-1)).toMatchObject({ type: "exit", exitCode: 0 })
    }, TEST_TIMEOUT_MS)

    it("endpoints where declared: the URL reaches the sandbox until revoked; revoke is idempotent", async () => {
      const endpoints = provider.capabilities.httpEndpoints
      if (endpoints === null) {
        await expectUnsupported(provider.exposeHttpEndpoint(sandbox, { port: 8000, leaseSeconds: 60 }), "exposeHttpEndpoint")
        await expectUnsupported(provider.revokeHttpEndpoint(sandbox, "lease"), "revokeHttpEndpoint")
        return
      }
      const lease = await run(provider.exposeHttpEndpoint(sandbox, { port: 8000, leaseSeconds: 120 }))
      expect(lease.url).toMatch(/^https?:\/\//)
      expect(Date.parse(lease.expiresAt) - Date.now()).toBeGreaterThan(60_000)
      const canServe = provider.capabilities.process !== null && provider.capabilities.files?.write === true
      let server: { executionId: string } | undefined
      if (canServe) {
        const token = randomSuffix()
        await run(provider.writeFile(sandbox, { path: "/workspace/www/index.html", data: new TextEncoder().encode(token), mode: "overwrite", createParents: true }))
        server = await run(provider.exec(sandbox, {
          command: ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/workspace/www"],
          timeoutSeconds: 120,
          maxOutputBytes: 1 << 16,
          processId: `proc_www${randomSuffix()}`
        }))
        let body = ""
        const deadline = Date.now() + 15_000
        while (body !== token && Date.now() < deadline) {
          body = await fetch(`${lease.url.replace(/\/+$/, "")}/index.html`).then((r) => (r.ok ? r.text() : ""), () => "")
          if (body !== token) await Bun.sleep(100)
        }
        expect(body).toBe(token)
      }
      expect((await run(provider.revokeHttpEndpoint(sandbox, lease.leaseId))).revoked).toBe(true)
      await run(provider.revokeHttpEndpoint(sandbox, lease.leaseId)) // idempotent: no error
      if (canServe) {
        const after = await fetch(`${lease.url.replace(/\/+$/, "")}/index.html`)
        expect(after.status).toBeGreaterThanOrEqual(400)
        if (server !== undefined && provider.capabilities.process?.cancel === true) await run(Effect.ignore(provider.cancelExec(sandbox, server.executionId)))
      }
    }, TEST_TIMEOUT_MS)

    it("cost is null or a cumulative non-negative amount", async () => {
      const from = new Date(Date.now() - 60_000).toISOString()
      const cost = await run(provider.getCost(sandbox, { from, to: new Date().toISOString() }))
      if (cost !== null) {
        expect(cost.amountMicrousd >= 0n).toBe(true)
        expect(["provider_reported", "provider_metered", "estimated_rate_card"]).toContain(cost.provenance)
        expect(Number.isNaN(Date.parse(cost.measuredThrough))).toBe(false)
      }
    }, TEST_TIMEOUT_MS)

    it("destroy is idempotent; a destroyed resource is absent and not reconciled", async () => {
      const otherId = `sbx_conf${randomSuffix()}`
      const other = await run(provider.create(conformanceInput(otherId)))
      expect(other.resourceId).not.toBe(sandbox.resourceId)
      await run(provider.destroy(other))
      await run(provider.destroy(other))
      expect(await run(provider.inspect(other))).toBe("absent")
      expect(await run(provider.reconcileCreate(otherId))).toBeNull()
    }, TEST_TIMEOUT_MS)
  })
