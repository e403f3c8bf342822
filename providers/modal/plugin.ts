/**
 * The Modal plugin. `remote` when MODAL_TOKEN_ID and MODAL_TOKEN_SECRET are set (one without the other stops the
 * gateway at start); MODAL_ENVIRONMENT (the SDK's default environment otherwise) and MODAL_APP_NAME (default
 * `metal-sandboxes`) are optional, and the SDK itself reads MODAL_SERVER_URL. Otherwise `emulated`, against the
 * built-in emulator over the local runtime. BYOK: `token_id`, `token_secret` and `environment`.
 *
 * Modal has no REST API: the adapter drives Modal's JavaScript SDK (`modal`, pinned at 0.11.1; the `1.2.0` under
 * that name on npm is an unrelated browser package) through `ModalApi` (adapter/api.ts). Its emulator is NOT a
 * gRPC server the real SDK talks to, as first planned: Bun's node:http2 server does carry a unary gRPC call from
 * the SDK, but the SDK exports none of its protobuf definitions, reads its server only from MODAL_SERVER_URL, and
 * runs exec and files through a second gRPC service (the task command router); so the emulator is an in-process
 * fake of `ModalApi` over the local runtime, and the adapter's code path is the same in both modes
 * (emulator/index.ts says more). The emulator does not pull images, so emulated Modal declares no `oci_image`
 * source (such a request goes to a provider whose emulator runs images, or fails saying why).
 */
import { Config, ConfigError, Effect, type Scope } from "effect"
import type { AppConfig } from "../../src/Config.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { envValue } from "../core/env.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import type { SandboxProvider } from "../../src/providers/Provider.ts"
import { DEFAULT_APP_NAME, makeModalProvider } from "./adapter/index.ts"
import { modalSdkApi } from "./adapter/sdk.ts"
import { modalEmulator } from "./emulator/index.ts"

export const ModalPlugin: Effect.Effect<SandboxProvider, ConfigError.ConfigError, AppConfig | LocalRuntime | Scope.Scope> = Effect.gen(function*() {
  const tokenId = yield* envValue("MODAL_TOKEN_ID")
  const tokenSecret = yield* envValue("MODAL_TOKEN_SECRET")
  const appName = (yield* envValue("MODAL_APP_NAME")) ?? DEFAULT_APP_NAME
  if ((tokenId === undefined) !== (tokenSecret === undefined)) {
    const missing = tokenId !== undefined ? "MODAL_TOKEN_SECRET" : "MODAL_TOKEN_ID"
    return yield* Effect.fail(ConfigError.MissingData([missing], "a Modal token needs both its id and its secret: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"))
  }
  if (tokenId !== undefined && tokenSecret !== undefined) {
    const environment = yield* envValue("MODAL_ENVIRONMENT")
    return makeModalProvider({
      api: modalSdkApi({ tokenId, tokenSecret, environment }),
      apiFor: (c) => modalSdkApi({ tokenId: c["token_id"] ?? "", tokenSecret: c["token_secret"] ?? "", environment: c["environment"] ?? environment }),
      appName,
      mode: "remote"
    })
  }
  const emulator = yield* modalEmulator
  const provider = makeModalProvider({
    api: emulator.api(emulator.tokenId, emulator.tokenSecret),
    // BYOK on the emulator: its own token stands for an account's, any other is refused as Modal refuses it.
    apiFor: (c) => emulator.api(c["token_id"] ?? "", c["token_secret"] ?? ""),
    appName,
    mode: "emulated"
  })
  return onLocalRuntime(provider, yield* LocalRuntime, emulator.runtimeIdOf)
})
