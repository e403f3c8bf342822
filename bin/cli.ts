/**
 * `bun run cli <word> …`: the program's command line (bin/CommandLine.ts) from a checkout — the same words as
 * `bun bin/main.ts` and the binary, except that no word at all prints the usage instead of serving.
 */
import { runCommandLine } from "./CommandLine.ts"

await runCommandLine(process.argv.slice(2), { prog: "bun run cli", whenEmpty: "usage" })
