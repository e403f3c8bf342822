/** What a sandbox's spec must be before the runtime touches the host for it (LocalRuntimeLive.ts create). */
import { MAX_DISK_MB, MIN_DISK_MB } from "./Disk.ts"
import { checkPolicy } from "./DomainPolicy.ts"
import { runtimeError as err, type RuntimeSandboxSpec } from "./LocalRuntime.ts"
import { parsePlatform } from "./oci/Reference.ts"
import { isPooled, POOL_PREFIX } from "./WarmPool.ts"

/** Ids are directory, cgroup and host names: a safe alphabet. */
export const SAFE_ID = /^[A-Za-z0-9_-]{1,100}$/

export const validateSpec = (spec: RuntimeSandboxSpec) => {
  if (typeof spec.id !== "string" || !SAFE_ID.test(spec.id)) throw err("invalid", "sandbox ids are 1-100 letters, digits, _ or -")
  if (isPooled(spec.id)) throw err("invalid", `sandbox ids cannot start with ${POOL_PREFIX}`)
  if (!(Number.isFinite(spec.vcpu) && spec.vcpu > 0 && spec.vcpu <= 1024)) throw err("invalid", "vcpu must be a positive number")
  if (!(Number.isInteger(spec.memoryMb) && spec.memoryMb >= 16 && spec.memoryMb <= 16 * 1024 * 1024)) throw err("invalid", "memoryMb must be an integer of at least 16")
  if (spec.diskMb !== undefined && !(Number.isInteger(spec.diskMb) && spec.diskMb >= MIN_DISK_MB && spec.diskMb <= MAX_DISK_MB)) {
    throw err("invalid", `diskMb must be an integer from ${MIN_DISK_MB} to ${MAX_DISK_MB}`)
  }
  for (const [k, v] of Object.entries(spec.env ?? {})) {
    if (k === "" || k.includes("=") || k.includes("\0") || typeof v !== "string" || v.includes("\0")) throw err("invalid", `bad environment variable ${k.slice(0, 100)}`)
  }
  if (spec.domains !== undefined) {
    const problem = checkPolicy(spec.domains)
    if (problem !== null) throw err("invalid", problem)
  }
  if (spec.image !== undefined) {
    if (typeof spec.image.reference !== "string" || spec.image.reference.length === 0) throw err("invalid", "image.reference must be an image reference")
    if (spec.image.platform !== undefined && parsePlatform(spec.image.platform) === undefined) throw err("invalid", "image.platform must be os/arch[/variant]")
    const command = spec.image.command
    if (command !== undefined && (!Array.isArray(command) || !command.every((a) => typeof a === "string" && !a.includes("\0")))) {
      throw err("invalid", "image.command must be a list of strings")
    }
    if (spec.image.idle !== undefined && typeof spec.image.idle !== "boolean") throw err("invalid", "image.idle must be a boolean")
  }
}
