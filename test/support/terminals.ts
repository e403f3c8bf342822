/** A terminal attach client for tests: `…/attach` as a WebSocket, keeping what it received. */
import type { KeyAuth } from "./sandbox.ts"

export const keyHeaders = (a: KeyAuth) => ({ authorization: `Bearer ${a.token}`, "x-metal-project-id": a.project })

/**
 * Attaches to a process through the gateway at `baseUrl`: the output as text, the text frames (JSON), the close;
 * `headers` are sent beside the credentials. With `auth` null, on the project path of `options.projectId` (a
 * member's: the credential is in `headers`, the dashboard's session cookie and its Origin).
 */
export const attachTerminal = (
  baseUrl: string,
  sandboxId: string,
  processId: string,
  auth: KeyAuth | null,
  options: { readonly query?: string; readonly headers?: Record<string, string>; readonly projectId?: string } = {}
) => {
  const base = auth === null ? `/v1/projects/${options.projectId}` : "/v1"
  const url = `${baseUrl.replace(/^http/, "ws")}${base}/sandboxes/${sandboxId}/processes/${processId}/attach${options.query ?? ""}`
  const ws = new WebSocket(url, { headers: { ...(auth === null ? {} : keyHeaders(auth)), ...options.headers } } as any)
  ws.binaryType = "arraybuffer"
  const state = { output: "", frames: [] as Array<any>, closed: null as null | { code: number; reason: string } }
  ws.onmessage = (e) => {
    if (typeof e.data === "string") state.frames.push(JSON.parse(e.data))
    else state.output += Buffer.from(e.data as ArrayBuffer).toString()
  }
  ws.onclose = (e) => (state.closed = { code: e.code, reason: e.reason })
  const opened = new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve()
    ws.onerror = () => reject(new Error("the attach did not open"))
  })
  const until = async (what: string, done: () => boolean, timeoutMs = 15_000) => {
    const deadline = Date.now() + timeoutMs
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; output so far: ${JSON.stringify(state.output.slice(-500))}, frames ${JSON.stringify(state.frames)}, closed ${JSON.stringify(state.closed)}`)
      await Bun.sleep(10)
    }
  }
  return {
    ws,
    state,
    opened,
    type: (text: string) => ws.send(new TextEncoder().encode(text)),
    resize: (cols: number, rows: number) => ws.send(JSON.stringify({ type: "resize", cols, rows })),
    waitOutput: (pattern: RegExp | string) => until(String(pattern), () => (typeof pattern === "string" ? state.output.includes(pattern) : pattern.test(state.output))),
    waitClose: () => until("the close", () => state.closed !== null),
    waitFrame: (type: string) => until(`a ${type} frame`, () => state.frames.some((f) => f.type === type))
  }
}

/**
 * The interactive round trip both the terminal and the replica tests walk on an `sh -i` attach opened at 80×24: a
 * prompt, a typed line answered (`stty size` and arithmetic), then a resize to 120×40 that `stty size` sees.
 */
export const shellRoundTrip = async (t: ReturnType<typeof attachTerminal>) => {
  await t.opened
  await t.waitOutput("$ ")
  t.type("stty size; echo sum=$((40+2))\n")
  await t.waitOutput("24 80")
  await t.waitOutput("sum=42")
  t.resize(120, 40)
  t.type("stty size\n")
  await t.waitOutput("40 120")
}
