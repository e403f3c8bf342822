/**
 * The program: `bun bin/main.ts` and the compiled binary (`bun run build` → dist/sandbox-gateway). With no word it
 * serves; every other word is bin/CommandLine.ts's. Wiring of the server lives in src/http/Http.ts.
 */
import { isCompiled, runCommandLine } from "./CommandLine.ts"

await runCommandLine(process.argv.slice(2), { prog: isCompiled() ? "sandbox-gateway" : "bun bin/main.ts", whenEmpty: "serve" })
