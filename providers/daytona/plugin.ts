/**
 * The Daytona plugin: `remote` with DAYTONA_API_KEY (DAYTONA_API_URL, default https://app.daytona.io/api;
 * DAYTONA_TARGET and DAYTONA_SNAPSHOT optional), otherwise `emulated` against the built-in emulator over the
 * local runtime (whose metrics are the sandbox's own, read by the runtime).
 *
 * Both sides are on Daytona's current API, as its SDK (`@daytonaio/sdk` 0.218) calls it: `GET /sandbox` answers a
 * page `{items, nextCursor}`; the toolbox's sessions (`process/session…`, with `…/command/{id}/input` for standard
 * input and `…/logs`), PTY sessions (`process/pty…`), `files/upload-v2`, `files/info`, `files`, `files/folder`. The
 * SDK also calls what the adapter does not need — `process/execute`, `files/bulk-upload` and `files/bulk-download`,
 * `process/pty/create-connect`, the logs WebSocket — and the emulator serves those too
 * (test/sdk/daytona.test.ts drives the SDK against it). One route the adapter uses that the SDK's file API no
 * longer does: `GET /files/download`, for ranged reads (the bulk download takes no Range); it is still the
 * toolbox's, behind the SDK's signed download URLs. The multipart `files/upload` and the bare-array list are
 * neither called nor served.
 */
import { Config, Effect, Option } from "effect"
import { AppConfig } from "../../src/Config.ts"
import { LocalRuntime } from "../../src/runtime/LocalRuntime.ts"
import { onLocalRuntime } from "../core/localRuntime.ts"
import { makeDaytonaProvider } from "./adapter/index.ts"
import { startDaytonaEmulator } from "./emulator/index.ts"

export const DaytonaPlugin = Effect.gen(function*() {
  const apiKey = yield* Config.option(Config.string("DAYTONA_API_KEY"))
  if (Option.isSome(apiKey)) {
    const baseUrl = yield* Config.string("DAYTONA_API_URL").pipe(Config.withDefault("https://app.daytona.io/api"))
    const target = yield* Config.option(Config.string("DAYTONA_TARGET"))
    const snapshot = yield* Config.option(Config.string("DAYTONA_SNAPSHOT"))
    return makeDaytonaProvider({ baseUrl, apiKey: apiKey.value, mode: "remote", target: Option.getOrUndefined(target), snapshot: Option.getOrUndefined(snapshot) })
  }
  const { dataDir } = yield* AppConfig
  const runtime = yield* LocalRuntime
  const emulator = yield* Effect.acquireRelease(Effect.sync(() => startDaytonaEmulator(dataDir, runtime)), (e) => Effect.sync(() => e.stop()))
  return onLocalRuntime(makeDaytonaProvider({ baseUrl: emulator.baseUrl, apiKey: emulator.apiKey, mode: "emulated" }), runtime)
})
