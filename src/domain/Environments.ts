/**
 * The environments a sandbox can be created from (`source: {kind: "environment"}`; DESIGN §4, reference §2): the
 * names and versions the gateway knows, listed by `GET /v1/environments`. A request naming another is a 422 at the
 * field with the known ones in `details`, never a sandbox on some default system. Every provider that takes
 * environment sources runs each of them (the emulators on the local runtime's base system; Prime, Modal and Vercel
 * pick their own image or runtime for node and python).
 */
import { Schema } from "effect"
import { Provider } from "./Sandbox.ts"
import { apiError, type Coded, Unprocessable } from "./Errors.ts"

export const ENVIRONMENTS = [
  { name: "metal/base", versions: ["latest"], description: "A Linux base system with a shell and the usual tools" },
  { name: "metal/node", versions: ["latest"], description: "The base system with Node.js" },
  { name: "metal/python", versions: ["latest"], description: "The base system with Python 3" }
] as const

export const EnvironmentEntry = Schema.Struct({
  name: Schema.String,
  versions: Schema.Array(Schema.String),
  default_version: Schema.String,
  description: Schema.String,
  providers: Schema.Array(Provider).annotations({ description: "The configured providers that create it" })
}).annotations({ identifier: "Environment" })

export const EnvironmentList = Schema.Struct({ environments: Schema.Array(EnvironmentEntry) }).annotations({ identifier: "EnvironmentList" })

/** A 422 for an environment source the catalogue does not have (the field, and the known names or versions). */
export const unknownEnvironment = (source: { readonly kind: string; readonly environment?: string | undefined; readonly version?: string | undefined }): Coded<Unprocessable, "validation_error"> | undefined => {
  if (source.kind !== "environment") return undefined
  const known = ENVIRONMENTS.map((e) => e.name)
  const entry = ENVIRONMENTS.find((e) => e.name === source.environment)
  if (entry === undefined) {
    const message = `source.environment must be one of: ${known.join(", ")}`
    return apiError(Unprocessable, "validation_error", message, { issues: [{ path: "source.environment", message, allowed: known }], environments: known })
  }
  const version = source.version ?? "latest"
  if ((entry.versions as ReadonlyArray<string>).includes(version)) return undefined
  const message = `source.version of ${entry.name} must be one of: ${entry.versions.join(", ")}`
  return apiError(Unprocessable, "validation_error", message, { issues: [{ path: "source.version", message, allowed: [...entry.versions] }], versions: [...entry.versions] })
}
