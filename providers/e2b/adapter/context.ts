/**
 * What every part of the E2B adapter shares: the control API (`X-API-Key`), the sandboxes' envd access tokens
 * (kept in memory only, never in the gateway's database; a restart fetches them again, and a 401 refreshes
 * one, as E2B may rotate it on resume), and envd requests (`E2b-Sandbox-Id`, `E2b-Sandbox-Port`,
 * `X-Access-Token`, and the user envd wants before 0.4.0).
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, type Schema } from "effect"
import type { ProviderCapabilities, ProviderSandbox } from "../../../src/providers/Provider.ts"
import { type CallOptions, makeWire, plainHttpClient } from "../../core/wire.ts"
import {
  classify,
  DEFAULT_USER,
  E2B_CAPABILITIES,
  ENVD_DEFAULT_USER,
  ENVD_PORT,
  envdAtLeast,
  envdBaseUrl,
  type EntryInfo,
  NAME,
  StatResponse,
  WireSandboxDetail
} from "./wire.ts"

export interface E2BProviderConfig {
  readonly apiUrl: string
  /** envd base: one host (header-routed), or a pattern with `{port}` and `{sandboxId}`. */
  readonly sandboxUrl: string
  readonly apiKey: string
  readonly mode: "remote" | "emulated"
  /** Template for `environment` sources (E2B_TEMPLATE_ID); default `base`. */
  readonly defaultTemplate?: string | undefined
  readonly capabilities?: ProviderCapabilities | undefined
  /** Defaults to the fetch client; tests pass a scripted one. */
  readonly httpClient?: HttpClient.HttpClient | undefined
  /**
   * Where the gateway's /workspace is at the provider: E2B's user cannot create /workspace, so by default
   * `/home/user` (its home, where commands start) remote, and `/workspace` in the emulator.
   */
  readonly workspaceDir?: string | undefined
}

export interface EnvdAccess {
  readonly token: string | null
  readonly envdVersion: string
}


export const makeContext = (config: E2BProviderConfig) => {
  const wire = makeWire<CallOptions>({ provider: NAME, client: config.httpClient ?? plainHttpClient(), timeout: "60 seconds", classify })
  const { decode, fail, send } = wire
  const apiUrl = config.apiUrl.replace(/\/+$/, "")
  const access = new Map<string, EnvdAccess>()

  const api = (method: "GET" | "POST" | "DELETE", path: string, body?: unknown) => {
    const request = HttpClientRequest.make(method)(`${apiUrl}${path}`).pipe(
      HttpClientRequest.setHeader("x-api-key", config.apiKey),
      HttpClientRequest.acceptJson
    )
    return body === undefined ? request : HttpClientRequest.bodyUnsafeJson(request, body)
  }

  const getDetail = (sandboxId: string) =>
    send(api("GET", `/sandboxes/${encodeURIComponent(sandboxId)}`), "get sandbox").pipe(Effect.flatMap(decode(WireSandboxDetail, "get sandbox")))

  const remember = (s: { readonly sandboxID: string; readonly envdVersion?: string | undefined; readonly envdAccessToken?: string | null | undefined }) =>
    access.set(s.sandboxID, { token: s.envdAccessToken ?? null, envdVersion: s.envdVersion ?? "0.0.0" })

  const refreshAccess = (sandbox: ProviderSandbox) =>
    Effect.map(getDetail(sandbox.resourceId), (detail) => {
      remember(detail)
      return access.get(sandbox.resourceId)!
    })
  const accessOf = (sandbox: ProviderSandbox) => Effect.suspend(() => {
    const known = access.get(sandbox.resourceId)
    return known === undefined ? refreshAccess(sandbox) : Effect.succeed(known)
  })

  /** envd wants a user only before 0.4.0 (later it has a default user). */
  const userHeader = (a: EnvdAccess): Record<string, string> =>
    envdAtLeast(a.envdVersion, ENVD_DEFAULT_USER) ? {} : { authorization: `Basic ${btoa(`${DEFAULT_USER}:`)}` }
  const userParam = (a: EnvdAccess) => (request: HttpClientRequest.HttpClientRequest) =>
    envdAtLeast(a.envdVersion, ENVD_DEFAULT_USER) ? request : HttpClientRequest.setUrlParam(request, "username", DEFAULT_USER)

  const envdRequest = (sandbox: ProviderSandbox, a: EnvdAccess, method: "GET" | "POST", path: string) =>
    HttpClientRequest.make(method)(`${envdBaseUrl(config.sandboxUrl, sandbox.resourceId)}${path}`).pipe(
      HttpClientRequest.setHeaders({
        "e2b-sandbox-id": sandbox.resourceId,
        "e2b-sandbox-port": String(ENVD_PORT),
        ...(a.token === null ? {} : { "x-access-token": a.token })
      })
    )

  /** One envd call; a 401 fetches the sandbox's current access token and tries once more. */
  const envd = (sandbox: ProviderSandbox, build: (a: EnvdAccess) => HttpClientRequest.HttpClientRequest, what: string, options: CallOptions = {}) =>
    Effect.flatMap(accessOf(sandbox), (a) => send(build(a), what, options)).pipe(
      Effect.catchIf(
        (e) => e.kind === "auth" && e.status === 401,
        () => Effect.flatMap(refreshAccess(sandbox), (a) => send(build(a), what, options))
      )
    )

  /** A unary Connect call (JSON codec). */
  const unary = <A, I>(sandbox: ProviderSandbox, method: string, body: unknown, schema: Schema.Schema<A, I>, mutating = false) =>
    envd(
      sandbox,
      (a) =>
        envdRequest(sandbox, a, "POST", `/${method}`).pipe(
          HttpClientRequest.setHeaders({ "connect-protocol-version": "1", ...userHeader(a) }),
          HttpClientRequest.bodyUnsafeJson(body)
        ),
      method,
      { mutating }
    ).pipe(Effect.flatMap(decode(schema, method)))

  const statOrNull = (sandbox: ProviderSandbox, path: string) =>
    unary(sandbox, "filesystem.Filesystem/Stat", { path }, StatResponse).pipe(
      Effect.map((r): EntryInfo | null => r.entry),
      Effect.catchIf((e) => e.kind === "not_found", () => Effect.succeed(null))
    )

  return {
    config,
    capabilities: config.capabilities ?? E2B_CAPABILITIES,
    fail,
    decode,
    send,
    api,
    getDetail,
    remember,
    forgetAccess: (sandboxId: string) => access.delete(sandboxId),
    accessOf,
    userHeader,
    userParam,
    envdRequest,
    envd,
    unary,
    statOrNull
  }
}

export type E2BContext = ReturnType<typeof makeContext>
