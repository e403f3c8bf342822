/**
 * Placement that anticipates (ARCHITECTURE.md §4): under `auto`, among the eligible providers, the sandbox goes
 * where the most of the API works, since an agent cannot know at create time which calls it will need later. The
 * breadth is a count over declared capabilities — one point each for processes, standard input, terminals, live
 * (streamed) output, cancel, pause and resume, file read, write, list, delete and parent directories, each write
 * mode, and HTTP endpoints — and ties go to the canonical order of the identifiers.
 */
import { type ProviderCapabilities, ProviderNames, type SandboxProvider } from "./Provider.ts"

type Placeable = Pick<SandboxProvider, "name" | "capabilities" | "sendInput" | "resizeTerminal">

/** Standard input of plain processes (not only terminals'). */
export const takesStdin = (p: Pick<SandboxProvider, "capabilities" | "sendInput">) => p.sendInput !== undefined && p.capabilities.process?.stdin !== false
/** Commands on a pseudo-terminal, with input and resize. */
export const hasTerminals = (p: Pick<SandboxProvider, "capabilities" | "sendInput" | "resizeTerminal">) =>
  p.capabilities.process?.terminal === true && p.sendInput !== undefined && p.resizeTerminal !== undefined

const WRITE_MODES: ReadonlyArray<NonNullable<ProviderCapabilities["files"]>["writeModes"][number]> = ["create", "overwrite", "append"]

export const apiBreadth = (p: Placeable): number => {
  const c = p.capabilities
  const points = [
    c.process?.execute === true,
    takesStdin(p),
    hasTerminals(p),
    c.process?.streams === true,
    c.process?.cancel === true,
    c.pause && c.resume,
    c.files?.read === true,
    c.files?.write === true,
    c.files?.list === true,
    c.files?.delete === true,
    c.files?.createParents === true,
    ...WRITE_MODES.map((mode) => c.files?.writeModes.includes(mode) === true),
    c.httpEndpoints?.expose === true && c.httpEndpoints.revoke
  ]
  return points.filter(Boolean).length
}

/**
 * The `auto` order of the configured providers: those on the organization's own account first (BYOK), then the
 * others; within each, the broadest API first, ties in the canonical order.
 */
export const autoOrder = <P extends Placeable>(providers: ReadonlyArray<P>, ownAccount: (p: P) => boolean = () => false): Array<P> =>
  providers
    .map((p) => ({ p, own: ownAccount(p) ? 0 : 1, breadth: apiBreadth(p), at: ProviderNames.indexOf(p.name) }))
    .sort((a, b) => a.own - b.own || b.breadth - a.breadth || a.at - b.at)
    .map(({ p }) => p)
