/**
 * The program: `bun src/main.ts` and the compiled binary (`bun run build` → dist/sandbox-gateway). With no word it
 * serves; every other word is src/cli/CommandLine.ts's. Wiring of the server lives in http/Http.ts.
 */
import { isCompiled, operatorInvocation, runCommandLine } from "./cli/CommandLine.ts"

await runCommandLine(process.argv.slice(2), {
  prog: isCompiled() ? "sandbox-gateway" : "bun src/main.ts",
  whenEmpty: "serve",
  serve: async () => (await import("./http/Http.ts")).runServer(operatorInvocation()),
  emulate: async (argv) => (await import("../providers/emulate.ts")).emulateMain(argv)
})
