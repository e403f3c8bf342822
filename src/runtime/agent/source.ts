// The agent's modules as text: Bun's text import embeds them, also inside a `bun build --compile` binary. Under
// vitest (vite's loader ignores import attributes) they are read from disk instead.
import * as fs from "node:fs"
// @ts-expect-error -- TypeScript does not model a text import of a .ts file
import bridge from "./bridge.ts" with { type: "text" }
// @ts-expect-error -- as above
import common from "./common.ts" with { type: "text" }
// @ts-expect-error -- as above
import desktop from "./desktop.ts" with { type: "text" }
// @ts-expect-error -- as above
import events from "./events.ts" with { type: "text" }
// @ts-expect-error -- as above
import files from "./files.ts" with { type: "text" }
// @ts-expect-error -- as above
import main from "./main.ts" with { type: "text" }
// @ts-expect-error -- as above
import processes from "./processes.ts" with { type: "text" }
// @ts-expect-error -- as above
import shells from "./shells.ts" with { type: "text" }
// @ts-expect-error -- as above
import x11 from "./x11.ts" with { type: "text" }

const embedded: Record<string, unknown> = { "bridge.ts": bridge, "common.ts": common, "desktop.ts": desktop, "events.ts": events, "files.ts": files, "main.ts": main, "processes.ts": processes, "shells.ts": shells, "x11.ts": x11 }

/** File name → TypeScript source; `main.ts` is the entry point. */
export const agentModules: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries(embedded).map(([name, text]) => [name, typeof text === "string" ? text : fs.readFileSync(new URL(`./${name}`, import.meta.url), "utf8")])
)
