/**
 * Each provider's capabilities as its adapter serves them — the declared row (core/declared.ts) with what the
 * adapter adds (E2B's and Daytona's terminals, E2B's cancel, …) — for whatever shows them without running the
 * gateway: the dashboard's provider table (scripts/build-web.ts). An emulated provider may give less still (its
 * host's largest sandbox, no OCI images where its emulator runs none): the registry's own capabilities say so.
 */
import type { Provider } from "../src/domain/Sandbox.ts"
import { BLAXEL_CAPABILITIES } from "./blaxel/adapter/wire.ts"
import { cloudflareCapabilities } from "./cloudflare/adapter/wire.ts"
import { CODESANDBOX_CAPABILITIES } from "./codesandbox/adapter/wire.ts"
import type { ProviderCapabilities } from "../src/providers/Provider.ts"
import { DAYTONA_CAPABILITIES } from "./daytona/adapter/wire.ts"
import { E2B_CAPABILITIES } from "./e2b/adapter/wire.ts"
import { FREESTYLE_CAPABILITIES } from "./freestyle/adapter/wire.ts"
import { MODAL_CAPABILITIES } from "./modal/adapter/index.ts"
import { NORTHFLANK_CAPABILITIES } from "./northflank/adapter/wire.ts"
import { PRIME_CAPABILITIES } from "./prime/adapter/wire.ts"
import { RUNLOOP_CAPABILITIES } from "./runloop/adapter/wire.ts"
import { VERCEL_CAPABILITIES } from "./vercel/adapter/wire.ts"

export const ADAPTER_CAPABILITIES: Record<Provider, ProviderCapabilities> = {
  blaxel: BLAXEL_CAPABILITIES,
  cloudflare: cloudflareCapabilities({ cost: false }),
  codesandbox: CODESANDBOX_CAPABILITIES,
  daytona: DAYTONA_CAPABILITIES,
  e2b: E2B_CAPABILITIES,
  freestyle: FREESTYLE_CAPABILITIES,
  modal: MODAL_CAPABILITIES,
  northflank: NORTHFLANK_CAPABILITIES,
  prime: PRIME_CAPABILITIES,
  runloop: RUNLOOP_CAPABILITIES,
  vercel: VERCEL_CAPABILITIES
}
