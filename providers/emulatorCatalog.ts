/**
 * What `sandbox-gateway emulate` (emulate.ts) can serve: for each provider, how its emulator is started and how to
 * point clients at it — the official SDK's environment and notes, and a gateway's variables for `remote` mode. Kept
 * apart from the command so that adding a provider's emulator is one entry here (CONTRIBUTING.md); Modal's entry
 * says why it cannot be served.
 */
import { PROVIDERS } from "../src/domain/Sandbox.ts"
import type { LocalRuntimeShape } from "../src/runtime/LocalRuntime.ts"
import { startBlaxelEmulator } from "./blaxel/emulator/index.ts"
import { startCloudflareEmulator } from "./cloudflare/emulator/index.ts"
import { startCodeSandboxEmulator } from "./codesandbox/emulator/index.ts"
import { startDaytonaEmulator } from "./daytona/emulator/index.ts"
import { startE2BEmulator } from "./e2b/emulator/index.ts"
import { startFreestyleEmulator } from "./freestyle/emulator/index.ts"
import { startNorthflankEmulator } from "./northflank/emulator/index.ts"
import { startPrimeEmulator } from "./prime/emulator/index.ts"
import { startRunloopEmulator } from "./runloop/emulator/index.ts"
import { startVercelEmulator } from "./vercel/emulator/index.ts"

export type ProviderName = (typeof PROVIDERS)[number]

/** One emulator being served, and how to point clients at it. */
export interface ServedEmulator {
  readonly provider: ProviderName
  /** Its base URLs on loopback, by what they serve (`api`, `sandbox` …). */
  readonly urls: Readonly<Record<string, string>>
  readonly apiKey: string
  /** The provider's official npm SDK, or null where there is none to point (Prime has none on npm). */
  readonly sdk: string | null
  /** Environment that points the official SDK at this emulator; empty where the SDK reads none (the notes say how). */
  readonly sdkEnv: Readonly<Record<string, string>>
  /** What else the SDK needs to know (options to pass, what it cannot do here). */
  readonly sdkNotes: ReadonlyArray<string>
  /** The gateway's variables that make a gateway use this emulator as the provider, in `remote` mode. */
  readonly gatewayEnv: Readonly<Record<string, string>>
  readonly stop: () => void
}

type Start = (dataDir: string, runtime: LocalRuntimeShape) => ServedEmulator

/** How each provider's emulator is served and described; Modal's is the reason it cannot be. */
export const EMULATORS: Readonly<Record<ProviderName, Start | { readonly unservable: string }>> = {
  e2b: (dataDir, runtime) => {
    const e = startE2BEmulator(dataDir, runtime)
    const env = { E2B_API_URL: e.apiUrl, E2B_SANDBOX_URL: e.sandboxUrl, E2B_API_KEY: e.apiKey }
    return {
      provider: "e2b",
      urls: { api: e.apiUrl, sandbox: e.sandboxUrl },
      apiKey: e.apiKey,
      sdk: "e2b",
      // The SDK takes E2B_SANDBOX_URL as envd's base for every sandbox (routed by its E2b-Sandbox-Id header), plain
      // http included; E2B_DOMAIN is then not used for the API or envd.
      sdkEnv: env,
      sdkNotes: [
        "or as options: Sandbox.create({ apiUrl, sandboxUrl, apiKey })",
        "every command and file call runs as the default user `user`; `user: \"root\"` is refused (a local sandbox has no root)",
        "sandbox.getHost(port) names <port>-<id>.<E2B_DOMAIN>: ports of a sandbox are not served"
      ],
      gatewayEnv: env,
      stop: e.stop
    }
  },
  daytona: (dataDir, runtime) => {
    const e = startDaytonaEmulator(dataDir, runtime)
    return {
      provider: "daytona",
      urls: { api: e.baseUrl },
      apiKey: e.apiKey,
      sdk: "@daytonaio/sdk",
      // The SDK reads both from the process environment (the API URL never from a .env file); the toolbox is found
      // through each sandbox's toolboxProxyUrl, which points back at this emulator.
      sdkEnv: { DAYTONA_API_URL: e.baseUrl, DAYTONA_API_KEY: e.apiKey },
      sdkNotes: [
        "or as options: new Daytona({ apiUrl, apiKey })",
        "the SDK's event stream (socket.io) is not served: it polls a sandbox's state instead",
        "not served: process.codeRun, git, LSP, snapshots, volumes, archive, pause (stop and start are), metrics, getPreviewLink (getSignedPreviewUrl is)"
      ],
      gatewayEnv: { DAYTONA_API_URL: e.baseUrl, DAYTONA_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  runloop: (dataDir, runtime) => {
    const e = startRunloopEmulator(dataDir, runtime)
    return {
      provider: "runloop",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: "@runloop/api-client",
      // RunloopSDK and Runloop read both; the SDK keeps the base URL's http.
      sdkEnv: { RUNLOOP_BASE_URL: e.apiUrl, RUNLOOP_API_KEY: e.apiKey },
      sdkNotes: [
        "or as options: new RunloopSDK({ baseURL, bearerToken })",
        "on Node, also http2: false: the SDK speaks HTTP/2 there by default, and the emulator serves HTTP/1.1 (Bun's fetch is unaffected)",
        "stdin (attach_stdin), persistent shells (shell_name), tunnels, logs and snapshots are refused or not served"
      ],
      gatewayEnv: { RUNLOOP_API_URL: e.apiUrl, RUNLOOP_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  vercel: (dataDir, runtime) => {
    const e = startVercelEmulator(dataDir, runtime)
    return {
      provider: "vercel",
      urls: { api: e.apiUrl },
      apiKey: e.token,
      sdk: "@vercel/sandbox",
      // The names Vercel's docs read an access token's credentials from; the SDK takes them as options.
      sdkEnv: { VERCEL_TOKEN: e.token, VERCEL_TEAM_ID: e.teamId, VERCEL_PROJECT_ID: e.projectId },
      sdkNotes: [
        "Sandbox.create({ token: VERCEL_TOKEN, teamId: VERCEL_TEAM_ID, projectId: VERCEL_PROJECT_ID, fetch }) (and the same for get and list)",
        `the SDK has no base-URL option or variable: give it a fetch that sends https://vercel.com/api/… to ${e.apiUrl}/…`,
        "persistent sandboxes (and so resume), ports, sources, drives and interactive sessions are refused or not served"
      ],
      gatewayEnv: { VERCEL_API_URL: e.apiUrl, VERCEL_TOKEN: e.token, VERCEL_PROJECT_ID: e.projectId, VERCEL_TEAM_ID: e.teamId },
      stop: e.stop
    }
  },
  blaxel: (dataDir, runtime) => {
    const e = startBlaxelEmulator(dataDir, runtime)
    return {
      provider: "blaxel",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: "@blaxel/core",
      // BL_DISABLE_H2: the emulator serves HTTP/1.1 (the SDK would otherwise open HTTP/2 sessions to Blaxel's edge).
      sdkEnv: { BL_API_URL: e.apiUrl, BL_API_KEY: e.apiKey, BL_WORKSPACE: e.workspace, BL_DISABLE_H2: "true" },
      sdkNotes: [
        "each sandbox's runtime is at the metadata.url the emulator answers with (BL_RUN_URL is not used)",
        "no pause (Blaxel has none); volumes, lifecycle policies, network settings, sessions, snapshots, drives and schedules are refused or not served"
      ],
      gatewayEnv: { BLAXEL_API_URL: e.apiUrl, BL_API_KEY: e.apiKey, BL_WORKSPACE: e.workspace },
      stop: e.stop
    }
  },
  freestyle: (dataDir, runtime) => {
    const e = startFreestyleEmulator(dataDir, runtime)
    return {
      provider: "freestyle",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: "freestyle",
      // The SDK reads its key from the environment; the API's address only as an option.
      sdkEnv: { FREESTYLE_API_KEY: e.apiKey },
      sdkNotes: [
        `new Freestyle({ baseUrl: "${e.apiUrl}" }) (the SDK reads no variable for it)`,
        "a VM's network is its firewall: { rules: [] } (none) or all outbound traffic to { public: true }; other rules, TLS rules, networks and placement are refused",
        "commands run as the VM's one user, `user`; snapshots, domains, identities and the PTY are not served"
      ],
      gatewayEnv: { FREESTYLE_API_URL: e.apiUrl, FREESTYLE_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  codesandbox: (dataDir, runtime) => {
    const e = startCodeSandboxEmulator(dataDir, runtime)
    return {
      provider: "codesandbox",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: "@codesandbox/sdk",
      sdkEnv: { CSB_BASE_URL: e.apiUrl, CSB_API_KEY: e.apiKey },
      sdkNotes: [
        "or as options: new CodeSandbox(apiKey, { baseUrl })",
        "lifecycle only (create, get, list, hibernate, shutdown, resume, delete): a VM's commands and files go through the SDK's pitcher websocket, which is not emulated"
      ],
      gatewayEnv: { CODESANDBOX_API_URL: e.apiUrl, CODESANDBOX_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  northflank: (dataDir, runtime) => {
    const e = startNorthflankEmulator(dataDir, runtime)
    return {
      provider: "northflank",
      urls: { api: e.apiUrl },
      apiKey: e.apiToken,
      sdk: "@northflank/js-client",
      // The client reads no environment: its context is given the token and host.
      sdkEnv: {},
      sdkNotes: [
        `contextProvider.addContext({ name, token: "<API key>", host: "${e.apiUrl.replace(/\/v1$/, "")}" }); project ${e.projectId}`,
        "lifecycle only (create, get, list, pause, resume, scale, delete): a container's shell goes through the exec websocket, which is not emulated"
      ],
      gatewayEnv: { NORTHFLANK_API_URL: e.apiUrl, NORTHFLANK_API_TOKEN: e.apiToken, NORTHFLANK_PROJECT_ID: e.projectId },
      stop: e.stop
    }
  },
  prime: (dataDir, runtime) => {
    const e = startPrimeEmulator(dataDir, runtime)
    return {
      provider: "prime",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: null,
      sdkEnv: {},
      sdkNotes: ["Prime's SDK is Python only (prime-sandboxes): point its base URL at the API above"],
      gatewayEnv: { PRIME_API_URL: e.apiUrl, PRIME_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  cloudflare: (dataDir, runtime) => {
    const e = startCloudflareEmulator(dataDir, runtime)
    return {
      provider: "cloudflare",
      urls: { api: e.apiUrl },
      apiKey: e.apiKey,
      sdk: null,
      sdkEnv: {},
      sdkNotes: ["this is the gateway's bridge Worker's API (providers/cloudflare/bridge): @cloudflare/sandbox itself runs only inside Workers"],
      gatewayEnv: { CLOUDFLARE_SANDBOX_API_URL: e.apiUrl, CLOUDFLARE_SANDBOX_API_KEY: e.apiKey },
      stop: e.stop
    }
  },
  modal: {
    unservable:
      "Modal's SDK speaks gRPC with Modal's private protocol definitions, so its emulator is an in-process fake of the SDK's interface (providers/modal/emulator): there is no wire to point an SDK at"
  }
}
