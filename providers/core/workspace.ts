/**
 * The gateway's `/workspace` where a provider keeps its user's work somewhere else (Daytona's home-relative
 * `workspace`, E2B's `/home/user`, where the sandbox user cannot create `/workspace`): paths under it are
 * rewritten on the way to the provider and back on the way out, so clients see `/workspace` everywhere.
 */
import { Effect } from "effect"
import type { ProviderCalls } from "./makeProvider.ts"

const GATEWAY = "/workspace"

export const workspacePaths = (providerDir: string) => {
  const dir = providerDir.length > 1 ? providerDir.replace(/\/+$/, "") : providerDir
  return {
    toProvider: (p: string) => (p === GATEWAY ? dir : p.startsWith(`${GATEWAY}/`) ? `${dir}${p.slice(GATEWAY.length)}` : p),
    toGateway: (p: string) => (dir === GATEWAY ? p : p === dir ? GATEWAY : p.startsWith(`${dir}/`) ? `${GATEWAY}${p.slice(dir.length)}` : p)
  }
}

/** An adapter's calls with file paths and working directories rewritten between `/workspace` and `providerDir`. */
export const withWorkspace = <P extends ProviderCalls>(provider: P, providerDir: string): P => {
  if (providerDir === GATEWAY) return provider
  const { toGateway, toProvider } = workspacePaths(providerDir)
  return {
    ...provider,
    exec: (sandbox, input) => provider.exec(sandbox, input.cwd === undefined ? input : { ...input, cwd: toProvider(input.cwd) }),
    readFile: (sandbox, input) => provider.readFile(sandbox, { ...input, path: toProvider(input.path) }),
    writeFile: (sandbox, input) => provider.writeFile(sandbox, { ...input, path: toProvider(input.path) }),
    ...(provider.readFileStream === undefined
      ? {}
      : { readFileStream: (sandbox, input) => provider.readFileStream!(sandbox, { ...input, path: toProvider(input.path) }) } satisfies Pick<ProviderCalls, "readFileStream">),
    ...(provider.writeFileStream === undefined
      ? {}
      : { writeFileStream: (sandbox, input) => provider.writeFileStream!(sandbox, { ...input, path: toProvider(input.path) }) } satisfies Pick<ProviderCalls, "writeFileStream">),
    deleteFile: (sandbox, input) => provider.deleteFile(sandbox, { ...input, path: toProvider(input.path) }),
    listFiles: (sandbox, input) =>
      provider.listFiles(sandbox, { ...input, path: toProvider(input.path) }).pipe(
        Effect.map((listed) => ({ ...listed, entries: listed.entries.map((e) => ({ ...e, path: toGateway(e.path) })) }))
      )
  }
}
