/**
 * `bun run cli <word> …`: the program's command line (bin/CommandLine.ts) from a checkout — the same words as
 * `bun bin/main.ts` and the binary, except that no word at all prints the usage instead of serving.
 */
import { operatorInvocation, runCommandLine } from "./CommandLine.ts"

await runCommandLine(process.argv.slice(2), {
  prog: "bun run cli",
  whenEmpty: "usage",
  serve: async () => {
    const [{ runServer }, { PLUGINS }] = await Promise.all([import("../src/http/Http.ts"), import("../providers/index.ts")])
    return runServer(operatorInvocation(), PLUGINS)
  },
  emulate: async (argv) => (await import("../providers/emulate.ts")).emulateMain(argv)
})
