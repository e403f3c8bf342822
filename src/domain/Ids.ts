/**
 * Identifiers. Public ids are a prefix plus 32 lowercase alphanumerics from a CSPRNG (ARCHITECTURE.md §6); inputs are
 * validated with the spec's looser patterns (`^prj_[A-Za-z0-9]+$`) so ids minted elsewhere are still accepted.
 */
import { Schema } from "effect"

const ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"

/** 32 characters from a 36-letter alphabet, unbiased (rejection sampling over random bytes). */
export const randomSuffix = (length = 32): string => {
  let out = ""
  while (out.length < length) {
    const bytes = crypto.getRandomValues(new Uint8Array(length * 2))
    for (const b of bytes) {
      if (b < 252 && out.length < length) out += ALPHABET[b % 36]
    }
  }
  return out
}

const prefixed = <const P extends string>(prefix: P, identifier: string) =>
  Schema.String.pipe(
    Schema.pattern(new RegExp(`^${prefix}_[A-Za-z0-9]+$`)),
    Schema.maxLength(128),
    Schema.annotations({ identifier, description: `Identifier with prefix "${prefix}_"`, examples: [`${prefix}_${"a".repeat(32)}` as never] })
  )

export const ProjectId = prefixed("prj", "ProjectId")
export const SandboxId = prefixed("sbx", "SandboxId")
export const OperationId = prefixed("op", "OperationId")
export const ProcessId = prefixed("proc", "ProcessId")
export const RuntimeOperationId = prefixed("rop", "RuntimeOperationId")
export const EndpointId = prefixed("ep", "EndpointId")
export const RecordingId = prefixed("rec", "RecordingId")

export const Uuid = Schema.UUID.annotations({ identifier: "Uuid" })

export const newId = (prefix: "prj" | "sbx" | "op" | "proc" | "rop" | "ep" | "rec") => `${prefix}_${randomSuffix()}`
export const newUuid = () => crypto.randomUUID()
