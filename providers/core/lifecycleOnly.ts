/**
 * The runtime half of a lifecycle-only adapter (CodeSandbox, Northflank): the provider's commands and files are
 * reached only through a websocket protocol of its SDK, which the gateway does not speak, so every runtime call
 * fails `unsupported` with the reason, as the declared capabilities (no process, no files, no endpoints) say. The
 * gateway never routes a runtime request there; these answers are for a caller that asks anyway.
 */
import { Effect } from "effect"
import { ProviderError, type ProviderName, type SandboxProvider } from "../../src/providers/Provider.ts"

type RuntimeHalf = Pick<
  SandboxProvider,
  "exec" | "execEvents" | "cancelExec" | "readFile" | "writeFile" | "listFiles" | "deleteFile" | "exposeHttpEndpoint" | "revokeHttpEndpoint"
>

export const lifecycleOnly = (provider: ProviderName, why: string): RuntimeHalf => {
  const refuse = (what: string) =>
    Effect.fail(new ProviderError({ provider, kind: "unsupported", message: `${provider} does not support ${what} (${why})`, retryable: false }))
  return {
    exec: () => refuse("processes"),
    execEvents: () => refuse("processes"),
    cancelExec: () => refuse("processes"),
    readFile: () => refuse("files"),
    writeFile: () => refuse("files"),
    listFiles: () => refuse("files"),
    deleteFile: () => refuse("files"),
    exposeHttpEndpoint: () => refuse("HTTP endpoints"),
    revokeHttpEndpoint: () => refuse("HTTP endpoints")
  }
}
