/**
 * Cost from a published rate card, for providers that report none (and for every emulated sandbox, which is
 * metered at its provider's prices): per-second prices of vCPU, memory and disk over the window, with the
 * disk a provider gives for free left out.
 */
import type { ProviderCost, ResolvedResources } from "../../src/providers/Provider.ts"

export interface RateCard {
  readonly version: string
  readonly vcpuSecondMicrousd: number
  readonly gibSecondMicrousd: number
  readonly diskGibSecondMicrousd?: number | undefined
  readonly freeDiskGib?: number | undefined
  /** How well the card matches the bill: `low` when, say, paused time is billed differently than counted here. */
  readonly confidence: ProviderCost["confidence"]
}

export const rateCardCost = (card: RateCard, resources: ResolvedResources, window: { readonly from: string; readonly to: string }): ProviderCost => {
  const seconds = Math.max(0, (Date.parse(window.to) - Date.parse(window.from)) / 1000)
  const disk = Math.max(0, (resources.diskMb ?? 0) / 1024 - (card.freeDiskGib ?? 0))
  const perSecond = resources.vcpu * card.vcpuSecondMicrousd + (resources.memoryMb / 1024) * card.gibSecondMicrousd +
    disk * (card.diskGibSecondMicrousd ?? 0)
  return {
    amountMicrousd: BigInt(Math.round(seconds * perSecond)),
    measuredThrough: window.to,
    provenance: "estimated_rate_card",
    confidence: card.confidence,
    rateCardVersion: card.version
  }
}
