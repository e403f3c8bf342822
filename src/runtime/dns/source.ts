// The DNS forwarder's modules as text, shipped beside the agent's in the tools tmpfs and run by the host (not in the
// jail: DomainPolicy.ts). As agent/source.ts: Bun's text import embeds them, vitest reads them from disk.
import * as fs from "node:fs"
// @ts-expect-error -- TypeScript does not model a text import of a .ts file
import forwarder from "./dnsForwarder.ts" with { type: "text" }
// @ts-expect-error -- as above
import message from "./dnsMessage.ts" with { type: "text" }

const embedded: Record<string, unknown> = { "dnsForwarder.ts": forwarder, "dnsMessage.ts": message }

/** File name → TypeScript source; `dnsForwarder.ts` is the entry point (JailNetwork.ts starts it). */
export const dnsModules: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries(embedded).map(([name, text]) => [name, typeof text === "string" ? text : fs.readFileSync(new URL(`./${name}`, import.meta.url), "utf8")])
)
