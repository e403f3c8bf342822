/**
 * The user CLI's profiles: the gateway URL, key and project of each `--profile`, in a file (0600, in a 0700
 * directory: `$SGW_CONFIG_DIR`, else `$XDG_CONFIG_HOME/sandbox-gateway`, else `~/.config/sandbox-gateway`).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { CliIo } from "./io.ts"

export interface Profile {
  readonly url: string
  readonly api_key: string
  readonly project_id: string
}

const configDir = (env: CliIo["env"]) =>
  env["SGW_CONFIG_DIR"] ?? path.join(env["XDG_CONFIG_HOME"] ?? path.join(env["HOME"] ?? os.homedir(), ".config"), "sandbox-gateway")
const profilesFile = (env: CliIo["env"]) => path.join(configDir(env), "profiles.json")

export const readProfiles = (env: CliIo["env"]): Record<string, Profile> => {
  try {
    const parsed = JSON.parse(fs.readFileSync(profilesFile(env), "utf8")) as { profiles?: Record<string, Profile> }
    return parsed.profiles ?? {}
  } catch {
    return {}
  }
}

export const writeProfiles = (env: CliIo["env"], profiles: Record<string, Profile>) => {
  const dir = configDir(env)
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  fs.chmodSync(dir, 0o700)
  const file = profilesFile(env)
  // Written beside and renamed: a profile file is never seen half-written.
  const tmp = `${file}.${process.pid}.tmp`
  fs.writeFileSync(tmp, `${JSON.stringify({ profiles }, null, 2)}\n`, { mode: 0o600 })
  fs.renameSync(tmp, file)
}
