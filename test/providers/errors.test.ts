/** Status and transport-failure mapping shared by the HTTP adapters, and the manifest of every declared row. */
import { FetchHttpClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Schema } from "effect"
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { Capabilities } from "../../src/domain/Runtime.ts"
import { capabilitiesToWire } from "../../src/providers/Capabilities.ts"
import { DECLARED } from "../../providers/core/declared.ts"
import { attemptCode, checkWrite, failedBeforeSending, kindOfStatus, kindOfTransportFailure, providerFailure } from "../../src/providers/errors.ts"
import { ProviderNames } from "../../src/providers/Provider.ts"

const client = Effect.runSync(Effect.provide(HttpClient.HttpClient, FetchHttpClient.layer))
const transportError = (url: string) =>
  Effect.runPromise(Effect.flip(client.execute(HttpClientRequest.post(url).pipe(HttpClientRequest.bodyText("x")))))

describe("kindOfStatus", () => {
  it("maps statuses to kinds", () => {
    const table: Array<[number, string]> = [
      [400, "invalid_request"], [401, "auth"], [402, "quota"], [403, "auth"], [404, "not_found"], [408, "unavailable"],
      [409, "customer"], [413, "invalid_request"], [422, "invalid_request"], [429, "capacity"], [500, "unavailable"],
      [502, "unavailable"], [503, "unavailable"], [504, "unavailable"]
    ]
    for (const [status, kind] of table) expect(kindOfStatus(status), String(status)).toBe(kind)
  })

  it("a state-changing call answered 500/502/504 may have happened: unknown_outcome; 503 did not", () => {
    expect(kindOfStatus(500, { ambiguous: true })).toBe("unknown_outcome")
    expect(kindOfStatus(502, { ambiguous: true })).toBe("unknown_outcome")
    expect(kindOfStatus(504, { ambiguous: true })).toBe("unknown_outcome")
    expect(kindOfStatus(503, { ambiguous: true })).toBe("unavailable")
    expect(kindOfStatus(429, { ambiguous: true })).toBe("capacity")
  })

  it("retryable follows the kind", () => {
    const fail = providerFailure("daytona")
    expect(fail("capacity", "x").retryable).toBe(true)
    expect(fail("unknown_outcome", "x").retryable).toBe(true)
    expect(fail("auth", "x", 401)).toMatchObject({ retryable: false, status: 401, provider: "daytona", kind: "auth" })
  })

  it("attempt codes follow the reference's failure classes", () => {
    expect(attemptCode("auth")).toBe("provider_auth_error")
    expect(attemptCode("capacity")).toBe("provider_capacity_unavailable")
    expect(attemptCode("timeout_absent")).toBe("provider_unavailable")
    expect(attemptCode("unknown_outcome")).toBe("provider_unknown_outcome")
    expect(attemptCode("unsupported")).toBe("capability_unsupported")
    expect(attemptCode("customer")).toBe("provider_error")
  })
})

describe("kindOfTransportFailure (real sockets)", () => {
  it("refused or unresolvable: nothing was sent, so unavailable even for a create", async () => {
    const refused = await transportError("http://127.0.0.1:1/x")
    expect(failedBeforeSending(refused)).toBe(true)
    expect(kindOfTransportFailure(refused, { mutating: true })).toBe("unavailable")
    const dns = await transportError("http://no-such-host.invalid/x")
    expect(kindOfTransportFailure(dns, { mutating: true })).toBe("unavailable")
  })

  it("reset after the request went out: unknown for a create, unavailable for a read; our timeout likewise", async () => {
    const server = net.createServer((socket) => socket.on("data", () => socket.resetAndDestroy()))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    try {
      const reset = await transportError(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}/x`)
      expect(failedBeforeSending(reset)).toBe(false)
      expect(kindOfTransportFailure(reset, { mutating: true })).toBe("unknown_outcome")
      expect(kindOfTransportFailure(reset, { mutating: false })).toBe("unavailable")
    } finally {
      server.close()
    }
    expect(kindOfTransportFailure("timeout", { mutating: true })).toBe("unknown_outcome")
    expect(kindOfTransportFailure("timeout", { mutating: false })).toBe("unavailable")
  })
})

describe("capability manifest", () => {
  it("every declared row encodes to a valid manifest of the API's schema (spec §2.8)", () => {
    for (const name of ProviderNames) {
      const wire = capabilitiesToWire(name, DECLARED[name])
      expect(Schema.decodeUnknownSync(Capabilities)(wire), name).toEqual(wire)
      expect(Schema.encodeSync(Capabilities)(wire), name).toEqual(wire)
    }
  })

  it("absent capabilities show as false and zero, not as missing fields", () => {
    expect(capabilitiesToWire("codesandbox", DECLARED.codesandbox)).toEqual({
      provider: "codesandbox",
      version: "1",
      lifecycle: { pause: true, resume: true },
      process: { execute: false, cancel: false, ordered_output: false, max_timeout_seconds: 0, max_output_bytes: 0 },
      filesystem: { read: false, write: false, write_modes: [], create_parents: false, list: false, delete: false, max_read_bytes: 0, max_write_bytes: 0 },
      http_endpoints: { create: false, revoke: false, max_lease_seconds: 0 },
      computer: null
    })
    expect(capabilitiesToWire("daytona", DECLARED.daytona)).toMatchObject({
      process: { execute: true, cancel: true, ordered_output: false, max_output_bytes: 100 * 1024 * 1024, max_timeout_seconds: 3600 },
      filesystem: { write_modes: ["create", "overwrite"], max_read_bytes: 10 * 1024 * 1024 },
      http_endpoints: { create: true, revoke: true, max_lease_seconds: 86_400 }
    })
  })

  it("a declared computer shows up with snake_case fields; no recording or screenshot is empty, not null", () => {
    const caps = { ...DECLARED.daytona, computer: { implementation: "native", actions: ["mouse_move"], screenshot: { formats: ["png"], maxBytes: 5 }, recording: null } }
    const wire = capabilitiesToWire("daytona", caps)
    expect(wire.computer).toEqual({ implementation: "native", actions: ["mouse_move"], screenshot: { formats: ["png"], max_bytes: 5 }, recording: { formats: [] } })
    expect(Schema.encodeSync(Capabilities)(wire)).toEqual(wire)
    const blind = capabilitiesToWire("daytona", { ...caps, computer: { ...caps.computer, screenshot: null } })
    expect(blind.computer?.screenshot).toEqual({ formats: [], max_bytes: 0 })
    expect(Schema.encodeSync(Capabilities)(blind)).toEqual(blind)
  })
})

describe("checkWrite: a write the declared file capabilities do not take is refused before any call", () => {
  const outcome = (files: Parameters<typeof checkWrite>[1], input: Parameters<typeof checkWrite>[2]) =>
    Effect.runSync(Effect.either(checkWrite("vercel", files, input)))
  const files = { ...DECLARED.vercel.files!, writeModes: ["create", "overwrite"] as const, createParents: false, maxWriteBytes: 4 }

  it("takes what is declared, and hands back the capabilities", () => {
    expect(outcome(files, { mode: "overwrite", createParents: false, data: new Uint8Array(4) })).toMatchObject({ _tag: "Right", right: files })
    // A stream states no size here: only its mode and parents are checked.
    expect(outcome(files, { mode: "create", createParents: false })._tag).toBe("Right")
  })

  it("refuses no writes at all, a mode or parents not offered (unsupported), and a body past one write (invalid_request)", () => {
    const kind = (e: ReturnType<typeof outcome>) => (e._tag === "Left" ? [e.left.kind, e.left.message] : ["none", ""])
    expect(kind(outcome(null, { mode: "overwrite", createParents: false }))).toEqual(["unsupported", "vercel does not support writing files"])
    expect(kind(outcome({ ...files, write: false }, { mode: "overwrite", createParents: false }))[0]).toBe("unsupported")
    expect(kind(outcome(files, { mode: "append", createParents: false }))).toEqual(["unsupported", "vercel does not support the append write mode"])
    expect(kind(outcome(files, { mode: "create", createParents: true }))).toEqual(["unsupported", "vercel does not support creating parent directories"])
    expect(kind(outcome(files, { mode: "create", createParents: false, data: new Uint8Array(5) }))).toEqual(["invalid_request", "vercel takes at most 4 bytes per write"])
  })
})
