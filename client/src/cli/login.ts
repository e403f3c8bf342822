/** `login`: checks a gateway URL, project and key with one call, then keeps them as a profile. */
import { createClient } from "../index.ts"
import { type Flags, UsageError } from "./args.ts"
import type { CliIo } from "./io.ts"
import { type Profile, readProfiles, writeProfiles } from "./profiles.ts"

/** A key on the command line would stay in the shell's history and show in the process list. */
const KEY_IN_ARGV = "--key would leave the key in your shell's history and the process list: pipe it in with --key-stdin, or leave it out to be asked for it"
/** More than any key: what `--key-stdin` reads at most. */
const MAX_KEY_BYTES = 4096

/** Refuses a command line that gives `login` the key itself (checked before parsing, so no form of it slips by). */
export const refuseKeyInArgv = (argv: ReadonlyArray<string>) => {
  if (argv[0] === "login" && argv.some((arg) => arg === "--key" || arg.startsWith("--key="))) throw new UsageError(KEY_IN_ARGV)
}

/** The key piped to `login --key-stdin`: the first line of stdin. */
const keyFromStdin = async (io: CliIo) => {
  if (io.stdin === undefined) throw new UsageError("--key-stdin reads the key from standard input: pipe it in (for example: printenv METAL_KEY | … login --key-stdin …)")
  const chunks: Array<Uint8Array> = []
  let size = 0
  for await (const chunk of io.stdin) {
    chunks.push(chunk)
    size += chunk.length
    if (size > MAX_KEY_BYTES) throw new UsageError("--key-stdin: standard input is longer than a key")
  }
  return Buffer.concat(chunks).toString("utf8").split(/\r?\n/)[0]!.trim()
}

export const login = async (io: CliIo, flags: Flags, profileName: string, print: (value: unknown, text: string) => void): Promise<number> => {
  const url = flags["url"]
  const project = flags["project"]
  if (typeof url !== "string" || typeof project !== "string") throw new UsageError("login needs --url and --project")
  // The key is read, never given in argv, and never printed.
  let key: string
  if (flags["key-stdin"] === true) key = await keyFromStdin(io)
  else if (io.readSecret !== undefined) key = (await io.readSecret("Project API key (metal_sk_…, not shown): ")).trim()
  else throw new UsageError("no terminal to ask for the key on: pipe it in with --key-stdin")
  if (key === "") throw new UsageError("no key given")
  const profile: Profile = { url: url.replace(/\/+$/, ""), api_key: key, project_id: project }
  // Checked before it is kept: a wrong URL or key fails here, not at the next command.
  await createClient({ baseUrl: profile.url, apiKey: key, projectId: project, attempts: 1 }).sandboxes.list({ limit: 1 })
  writeProfiles(io.env, { ...readProfiles(io.env), [profileName]: profile })
  print({ profile: profileName, url: profile.url, project_id: project }, `logged in to ${profile.url} (profile ${profileName})`)
  return 0
}
