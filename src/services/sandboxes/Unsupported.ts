/**
 * A later call the sandbox's provider cannot serve (409 `capability_unsupported`; a pause keeps the reference's
 * `unsupported_operation`). The message says what the provider cannot do and what the create could have said to be
 * placed where it works: the create-time feature of the spec (`features.pty: true`, `features.process.cancel: true`,
 * …), or, where the spec has none (standard input), a provider that can. `details.providers` names the configured
 * providers that can; `details.feature` the feature, when there is one.
 */
import { Effect } from "effect"
import type { SandboxRow } from "../../db/repos/Sandboxes.ts"
import { conflict } from "../../domain/Errors.ts"
import type { SandboxProvider } from "../../providers/Provider.ts"
import { hasTerminals, takesStdin } from "../../providers/placement.ts"
import { ProviderAccounts } from "../ProviderAccounts.ts"
import type { FileOperation } from "./ProviderErrors.ts"

export type Need =
  | { readonly kind: "execute" | "stdin" | "terminal" | "cancel" | "pause" | "resume" | "create_parents" | "desktop" }
  | { readonly kind: "endpoints"; readonly port?: number | undefined }
  | { readonly kind: "files"; readonly operation: FileOperation }
  | { readonly kind: "write_mode"; readonly mode: "create" | "overwrite" | "append" }

interface Rule {
  /** After "<provider> sandboxes cannot …". */
  readonly what: string
  /** The create-time feature that places a sandbox where this works; undefined where the spec has none. */
  readonly feature: string | undefined
  readonly can: (p: SandboxProvider) => boolean
}

const ruleOf = (need: Need): Rule => {
  switch (need.kind) {
    case "execute":
      return { what: "run processes", feature: "features.process.execute: true", can: (p) => p.capabilities.process?.execute === true }
    case "stdin":
      return { what: "take standard input", feature: undefined, can: takesStdin }
    case "terminal":
      return { what: "open terminals", feature: "features.pty: true", can: hasTerminals }
    case "cancel":
      return { what: "cancel processes", feature: "features.process.cancel: true", can: (p) => p.capabilities.process?.cancel === true }
    case "pause":
      return { what: "be paused", feature: "features.pause_resume: true", can: (p) => p.capabilities.pause && p.capabilities.resume }
    case "resume":
      return { what: "be resumed", feature: "features.pause_resume: true", can: (p) => p.capabilities.pause && p.capabilities.resume }
    case "desktop":
      return { what: "drive a desktop (computer use)", feature: "features.computer_use: true", can: (p) => p.capabilities.computer != null && p.computer !== undefined }
    case "create_parents":
      return { what: "create parent directories", feature: "features.filesystem.create_parents: true", can: (p) => p.capabilities.files?.createParents === true }
    case "endpoints":
      return {
        what: "serve HTTP endpoints",
        feature: `features.public_ports: [${need.port ?? 8000}]`,
        can: (p) => p.capabilities.httpEndpoints?.expose === true && p.capabilities.httpEndpoints.revoke
      }
    case "files":
      return { what: `${need.operation} files`, feature: `features.filesystem.${need.operation}: true`, can: (p) => p.capabilities.files?.[need.operation] === true }
    case "write_mode":
      return {
        what: `write files in mode ${need.mode}`,
        feature: `features.filesystem.write_modes: ["${need.mode}"]`,
        can: (p) => p.capabilities.files?.writeModes.includes(need.mode) === true
      }
  }
}

/** The code of a call the provider cannot serve: a pause is an unsupported operation, the rest a capability. */
export type UnsupportedCode<K extends Need["kind"]> = K extends "pause" ? "unsupported_operation" : "capability_unsupported"

export const unsupportedCall = <const N extends Need>(sandbox: SandboxRow, need: N, extra: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const rule = ruleOf(need)
    const able = (yield* ProviderAccounts).configured.filter(rule.can).map((p) => p.name)
    const hint = able.length === 0
      ? "; no configured provider can"
      : rule.feature !== undefined
      ? `; create the sandbox with ${rule.feature} to be placed on a provider that can`
      : `; create the sandbox with provider set to one that can (${able.join(", ")})`
    const code = (need.kind === "pause" ? "unsupported_operation" : "capability_unsupported") as UnsupportedCode<N["kind"]>
    return yield* conflict(code, `${sandbox.provider} sandboxes cannot ${rule.what}${hint}`, {
      provider: sandbox.provider,
      ...(rule.feature === undefined ? {} : { feature: rule.feature }),
      providers: able,
      ...extra
    })
  })
