/**
 * The program: `bun bin/main.ts` and the compiled binary (`bun run build` → dist/sandbox-gateway). With no word it
 * serves; every other word is bin/CommandLine.ts's. Wiring of the server lives in src/http/Http.ts.
 */
import { isCompiled, operatorInvocation, runCommandLine } from "./CommandLine.ts"

await runCommandLine(process.argv.slice(2), {
  prog: isCompiled() ? "sandbox-gateway" : "bun bin/main.ts",
  whenEmpty: "serve",
  serve: async () => {
    const [{ runServer }, { PLUGINS }] = await Promise.all([import("../src/http/Http.ts"), import("../providers/index.ts")])
    return runServer(operatorInvocation(), PLUGINS)
  },
  emulate: async (argv) => (await import("../providers/emulate.ts")).emulateMain(argv)
})
