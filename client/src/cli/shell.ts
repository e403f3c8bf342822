/** `sandbox shell`: a terminal in the sandbox driven from this one (raw keys, resizes, its output as it comes). */
import { processExitCode, type SandboxCommand } from "./io.ts"

export const shell = async ({ io, gw, flags, rest, json, print, needId }: SandboxCommand): Promise<number> => {
  const sandbox = await gw.sandboxes.get(needId())
  const term = io.terminal
  const size = term?.size() ?? { cols: 80, rows: 24 }
  const decoder = new TextDecoder()
  // With --json stdout carries the result alone; the terminal's output goes to stderr.
  const show = json ? (bytes: Uint8Array) => io.err(decoder.decode(bytes, { stream: true })) : io.outBytes ?? ((bytes: Uint8Array) => io.out(decoder.decode(bytes, { stream: true })))
  const options = {
    cols: size.cols,
    rows: size.rows,
    env: { TERM: io.env["TERM"] ?? "xterm-256color" },
    ...(typeof flags["cwd"] === "string" ? { cwd: flags["cwd"] } : {}),
    onOutput: (_text: string, bytes: Uint8Array) => show(bytes)
  }
  const session = rest !== undefined && rest.length > 0 ? await sandbox.terminal(rest, options) : await sandbox.shell(options)
  // Input may outlive the process by a moment (typed as it ended): that is dropped, not an error.
  const type = (data: string | Uint8Array) => {
    try {
      session.write(data)
    } catch {
      // the terminal is closed
    }
  }
  const stops: Array<() => void> = []
  if (term?.isTty === true) term.setRawMode(true)
  let exit: Awaited<typeof session.exit>
  try {
    if (term !== undefined) {
      // A pipe's end is ^D typed, as a terminal's user would end the input.
      stops.push(term.input(type, () => term.isTty || type("\x04")))
      stops.push(term.onResize(() => {
        const now = term.size()
        if (now !== undefined) {
          try {
            session.resize(now.cols, now.rows)
          } catch {
            // the terminal is closed
          }
        }
      }))
    }
    exit = await session.exit
  } finally {
    for (const stop of stops) stop()
    if (term?.isTty === true) term.setRawMode(false)
  }
  if (json) print({ process_id: session.processId, state: exit.state, exit_code: exit.exitCode }, "")
  return processExitCode(exit.state, exit.exitCode)
}
