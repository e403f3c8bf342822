/**
 * The E2B emulator's `desktop` template (the one E2B's Desktop SDK creates), over the local runtime's desktop: the
 * runtime already gives a sandbox a display of its own in its jail (Xvnc with openbox, agent/desktop.ts), so the
 * template's own display server and session are that desktop, not a second one.
 *
 * The SDK starts the desktop with two background commands: `Xvfb :N … -screen 0 WxHx24 …` and `startxfce4`.
 * Started in a `desktop` sandbox, the first starts the runtime's desktop at that size and makes display `:N` the
 * runtime's (a link in the jail's /tmp/.X11-unix, made by the sandbox's own user inside its jail), then stays
 * running as the display's process; the second stays running as the session: the runtime's openbox is the window
 * manager, and the session's processes the SDK waits for by name (`pgrep -x xfce4-session`, `xfwm4`, `xfdesktop`)
 * are stand-ins of those names that only wait.
 * Everything else the SDK and the adapter run — xdotool, xdpyinfo, scrot, ffmpeg — is the real program, in the
 * jail, against that display.
 */
import { DISPLAY } from "../../../src/runtime/DesktopWire.ts"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import { DESKTOP_TEMPLATE } from "../adapter/wire.ts"
import type { EmulatedSandbox } from "./books.ts"

const XVFB = /^\s*(?:exec\s+)?Xvfb\s+:(\d{1,4})\b(.*)$/s
const SESSION = /^\s*(?:exec\s+)?startxfce4\b/
/** The SDK's default screen (`resolution` unsaid). */
const DEFAULT_SIZE = { width: 1024, height: 768 } as const
const RUNTIME_DISPLAY = Number(DISPLAY.slice(1))

/** The command line of `bash -l -c <script>` (how envd's clients start commands), or null. */
const scriptOf = (command: ReadonlyArray<string>) =>
  command.length === 4 && /^(\/usr)?\/bin\/(ba)?sh$/.test(command[0]!) && command[1] === "-l" && command[2] === "-c" ? command[3]! : null

/** Stays running until it is signalled, as the display server or session it stands for. */
const standIn = (prelude: string) => ["/bin/sh", "-c", `${prelude}exec sleep infinity`]

/** A process's name is its program's file name: links to sleep, named as xfce's. */
const SESSION_STAND_IN = [
  'd=$(mktemp -d) || exit 1',
  'for p in xfce4-session xfwm4 xfdesktop; do ln -s /bin/sleep "$d/$p" || exit 1; done',
  '"$d/xfwm4" infinity &',
  '"$d/xfdesktop" infinity &',
  'exec "$d/xfce4-session" infinity'
].join("\n")

const failing = (message: string) => ["/bin/sh", "-c", 'printf "%s\\n" "$0" >&2; exit 1', message]

/**
 * The command to run for this Start in this sandbox: the desktop template's display server and session are the
 * runtime's desktop; every other command runs as it is.
 */
export const desktopCommand = async (runtime: LocalRuntimeShape, sandbox: EmulatedSandbox, command: ReadonlyArray<string>): Promise<ReadonlyArray<string>> => {
  if (sandbox.templateID !== DESKTOP_TEMPLATE) return command
  const script = scriptOf(command)
  if (script === null) return command
  if (SESSION.test(script)) return ["/bin/sh", "-c", SESSION_STAND_IN]
  const xvfb = XVFB.exec(script)
  if (xvfb === null) return command
  const display = Number(xvfb[1])
  const screen = /-screen\s+0\s+(\d{1,5})x(\d{1,5})/.exec(xvfb[2]!)
  const size = screen === null ? DEFAULT_SIZE : { width: Number(screen[1]), height: Number(screen[2]) }
  try {
    await run(runtime.startDesktop(sandbox.sandboxID, size))
  } catch (e) {
    return failing(`Xvfb: the desktop did not start: ${(e as { message?: unknown }).message ?? String(e)}`)
  }
  // Display :N is the runtime's: its socket, linked in the jail's own /tmp/.X11-unix by the sandbox's user.
  return standIn(display === RUNTIME_DISPLAY ? "" : `ln -sfn X${RUNTIME_DISPLAY} /tmp/.X11-unix/X${display} && `)
}
