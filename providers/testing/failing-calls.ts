/**
 * The start of a test's fake provider: every call of the contract fails with the error the test gives, and the fake
 * replaces the few calls it needs (`{ ...failingCalls(…), create: … }`).
 */
import type { Effect } from "effect"
import type { ProviderCapabilities, ProviderError } from "../../src/providers/Provider.ts"
import type { ProviderCalls } from "../core/makeProvider.ts"

export const failingCalls = (capabilities: ProviderCapabilities, fail: () => Effect.Effect<never, ProviderError>): ProviderCalls => ({
  capabilities,
  create: fail,
  reconcileCreate: fail,
  inspect: fail,
  destroy: fail,
  pause: fail,
  resume: fail,
  getCost: fail,
  exec: fail,
  execEvents: fail,
  cancelExec: fail,
  readFile: fail,
  writeFile: fail,
  listFiles: fail,
  deleteFile: fail,
  exposeHttpEndpoint: fail,
  revokeHttpEndpoint: fail
})
