/**
 * The labels every emulator puts on each jail it creates, read by the gateway's jail reaper
 * (src/services/sandboxes/Reaper.ts) to tell a live sandbox's jail from one to remove: which provider made it, the
 * id of the resource the emulator handed back for it (what the adapter records as the sandbox's `resourceId`; a
 * jail's own id often differs), and our sandbox id when the create request carried it (each adapter sends it
 * somewhere of its provider's: labels, metadata, tags, a name or a header; its emulator reads it from there).
 */
import { Schema } from "effect"
import { SandboxId } from "../domain/Ids.ts"
import type { ProviderName } from "./Provider.ts"

export const PROVIDER_LABEL = "provider"
export const SANDBOX_LABEL = "metal.sandbox_id"
export const RESOURCE_LABEL = "metal.resource_id"

const isSandboxId = Schema.is(SandboxId)

/**
 * The jail's labels. `sandboxId` is whatever the request carried: kept only when it is one of our sandbox ids (a
 * request made by anyone else gets no owner, and its jail is reaped as nobody's).
 */
export const jailLabels = (provider: ProviderName, resourceId: string, sandboxId: unknown): Record<string, string> => ({
  [PROVIDER_LABEL]: provider,
  [RESOURCE_LABEL]: resourceId,
  ...(isSandboxId(sandboxId) ? { [SANDBOX_LABEL]: sandboxId } : {})
})
