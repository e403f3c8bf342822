/** What the Daytona emulator answers with: Daytona's error body, its sandbox shape, Go's file modes. */
import type { EmulatedSandbox } from "./books.ts"

export const json = (body: unknown, status = 200) => Response.json(body, { status })
export const error = (status: number, message: string) => json({ statusCode: status, message, error: message }, status)

/** Thrown by a handler: answered with its status and Daytona's error body. */
export class Refused extends Error {
  constructor(readonly status: number, message: string) {
    super(message)
  }
}

/** A mode as the daemon sends it: Go's `os.FileMode.String()`, e.g. `-rw-r--r--`, `drwxr-xr-x`, `Lrwxrwxrwx`. */
export const goFileMode = (entry: { readonly type: "file" | "directory" | "symlink" | "other"; readonly mode: number }) => {
  const kind = entry.type === "file" ? "-" : entry.type === "directory" ? "d" : entry.type === "symlink" ? "L" : "?"
  const bits = "rwxrwxrwx".split("").map((c, i) => ((entry.mode >> (8 - i)) & 1 ? c : "-")).join("")
  return kind + bits
}

export const toWire = (s: EmulatedSandbox, baseUrl: string) => ({
  id: s.id,
  name: s.name,
  organizationId: "emulated",
  labels: s.labels,
  state: s.state,
  ...(s.errorReason !== undefined ? { errorReason: s.errorReason } : {}),
  cpu: s.cpu,
  memory: s.memory,
  disk: s.disk,
  env: s.env,
  public: false,
  target: "local",
  createdAt: s.createdAt,
  toolboxProxyUrl: `${baseUrl}/toolbox`
})
