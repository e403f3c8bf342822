/**
 * The sandbox's desktop (computer use): a virtual display of its own, with a small window manager, and what drives
 * it — the mouse through XTEST from the agent itself, the keyboard through xdotool (it maps any character to a
 * key), screenshots straight from the X server (x11.ts), recordings with ffmpeg (x11grab to
 * H.264 in an mp4) — and the `/desktop` routes of the agent's HTTP API.
 *
 * Everything lives in the jail: the X server listens only on a unix socket in the jail's own /tmp/.X11-unix (no
 * TCP, no abstract socket; the jail has its own network namespace anyway), and every program here starts through
 * the same cgroup join as a command (processes.ts), so the desktop counts against the sandbox's own limits. Xvnc
 * is preferred to Xvfb where it is installed: it serves the same display over VNC on the jail's loopback, and
 * noVNC (websockify) on LIVE_VIEW_PORT turns that into a page a browser opens through an ordinary endpoint.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Protocol from "../AgentProtocol.ts"
import { AgentError, invalid, json, type Query, RUN_DIR } from "./common.ts"
import { spawnInSandbox } from "./shells.ts"
import { DisplayError, drawCursor, encodePng, type PointerEvent, type Rgb, scaleImage, X11 } from "./x11.ts"

/** The display's number: `:1`, as Daytona's desktops have it. */
export const DISPLAY = ":1"
const SOCKET = "/tmp/.X11-unix/X1"
/** The live view (noVNC) listens here in the jail; the VNC server itself only on the jail's loopback. */
export const LIVE_VIEW_PORT = 6080
const VNC_PORT = 5900
const NOVNC_WEB = "/usr/share/novnc"
const RECORDINGS_DIR = path.join(RUN_DIR, "recordings")
const START_TIMEOUT_MS = 15_000
const MAX_WIDTH = 3840
const MAX_HEIGHT = 2160

const unsupported = (message: string) => new AgentError(409, "conflict", message)
const which = (names: ReadonlyArray<string>) => names.map((n) => `/usr/bin/${n}`).find((p) => fs.existsSync(p))

interface Desktop {
  readonly width: number
  readonly height: number
  readonly liveView: boolean
}

let desktop: Desktop | undefined
let starting: Promise<Desktop> | undefined
/** The screenshots' connection to the display, kept open between screenshots. */
let connection: X11 | undefined

const env = () => ({ DISPLAY, HOME: "/workspace", PATH: "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8" })
const spawn = (command: ReadonlyArray<string>, stdin: "ignore" | "pipe" = "ignore") => spawnInSandbox(command, env(), stdin)

const connect = async (): Promise<X11> => {
  if (connection !== undefined && !connection.broken) return connection
  connection?.close()
  connection = await X11.connect(SOCKET, 5000)
  return connection
}

/** The display that already runs (after an agent restart the X server is still there). */
const running = async (): Promise<Desktop | undefined> => {
  if (desktop !== undefined) return desktop
  if (!fs.existsSync(SOCKET)) return undefined
  try {
    const x = await connect()
    desktop = { width: x.screen.width, height: x.screen.height, liveView: fs.existsSync(NOVNC_WEB) && which(["Xvnc"]) !== undefined }
    return desktop
  } catch {
    return undefined
  }
}

const launch = async (width: number, height: number): Promise<Desktop> => {
  const xvnc = which(["Xvnc"])
  const xvfb = which(["Xvfb"])
  if (xvnc === undefined && xvfb === undefined) throw unsupported("this sandbox's system has no X server (Xvfb or Xvnc), so it has no desktop")
  fs.mkdirSync("/tmp/.X11-unix", { recursive: true, mode: 0o1777 })
  fs.rmSync(SOCKET, { force: true })
  fs.rmSync("/tmp/.X1-lock", { force: true })
  // Unix socket only: no TCP, no abstract socket; -noreset: the display lives on when its last client leaves.
  const common = ["-nolisten", "tcp", "-nolisten", "local", "-noreset"]
  const server = xvnc !== undefined
    ? spawn([xvnc, DISPLAY, "-geometry", `${width}x${height}`, "-depth", "24", "-SecurityTypes", "None", "-localhost", "-rfbport", String(VNC_PORT), "-AlwaysShared", ...common])
    : spawn([xvfb!, DISPLAY, "-screen", "0", `${width}x${height}x24`, ...common])
  const deadline = Date.now() + START_TIMEOUT_MS
  for (;;) {
    if (server.exitCode !== null || server.signalCode !== null) throw new AgentError(500, "internal", "the display server exited as it started")
    if (fs.existsSync(SOCKET)) {
      try {
        await connect()
        break
      } catch {}
    }
    if (Date.now() > deadline) throw new AgentError(500, "internal", "the display server did not start in time")
    await Bun.sleep(20)
  }
  const wm = which(["openbox", "matchbox-window-manager"])
  if (wm !== undefined) spawn([wm])
  const liveView = xvnc !== undefined && fs.existsSync(NOVNC_WEB) && which(["websockify"]) !== undefined
  if (liveView) spawn(["/usr/bin/websockify", "--web", NOVNC_WEB, String(LIVE_VIEW_PORT), `127.0.0.1:${VNC_PORT}`])
  return { width, height, liveView }
}

/** Starts the desktop at this size (idempotent: a running one is answered as it is). */
const start = async (width: number, height: number): Promise<Desktop> => {
  const current = await running()
  if (current !== undefined) return current
  starting ??= launch(width, height).then((d) => (desktop = d)).finally(() => (starting = undefined))
  return starting
}

const requireDesktop = async (): Promise<Desktop> => {
  const d = await running()
  if (d === undefined) throw unsupported("the desktop is not running")
  return d
}

// Input -------------------------------------------------------------------------------------------------------

const BUTTONS: Record<string, string> = { left: "1", middle: "2", right: "3" }
const MODIFIERS: Record<string, string> = { ctrl: "ctrl", alt: "alt", shift: "shift", cmd: "super" }
/** A keysym name (Return, F5, a) or one printable character. */
const KEY = /^(?:[A-Za-z0-9_]{1,64}|[!-~])$/
/** Combinations of keys joined by +, several separated by spaces (ctrl+c, ctrl+shift+t). */
const HOTKEYS = /^[A-Za-z0-9_]{1,64}(?:\+[A-Za-z0-9_]{1,64}){0,7}(?: [A-Za-z0-9_]{1,64}(?:\+[A-Za-z0-9_]{1,64}){0,7}){0,15}$/
const MAX_TEXT = 100_000

const coordinate = (v: unknown, max: number) => {
  if (!Number.isSafeInteger(v) || (v as number) < 0 || (v as number) > max) throw invalid(`coordinates are integers from 0 to ${max}`)
  return String(v)
}

const intIn = (v: unknown, min: number, max: number, name: string) => {
  if (!Number.isSafeInteger(v) || (v as number) < min || (v as number) > max) throw invalid(`${name} must be an integer from ${min} to ${max}`)
  return v as number
}

/** The xdotool arguments of a keyboard action, and its text for standard input (typing). */
const xdotoolArgs = (a: Record<string, unknown>): { readonly args: Array<string>; readonly text?: string; readonly timeoutMs: number } => {
  switch (a["type"]) {
    case "keyboard_type": {
      const text = a["text"]
      if (typeof text !== "string" || text.length === 0 || text.length > MAX_TEXT) throw invalid(`text is 1-${MAX_TEXT} characters`)
      const delay = intIn(a["delay_ms"] ?? 12, 0, 60_000, "delay_ms")
      // From standard input: a long text would not fit in one argument.
      return { args: ["type", "--delay", String(delay), "--file", "-"], text, timeoutMs: 10_000 + text.length * (delay + 5) }
    }
    case "keyboard_key": {
      const key = a["key"]
      if (typeof key !== "string" || !KEY.test(key)) throw invalid("key is a key name (Return, F5, a) or one printable character")
      const mods = a["modifiers"] ?? []
      if (!Array.isArray(mods) || mods.length > 4 || !mods.every((m) => typeof m === "string" && MODIFIERS[m] !== undefined)) {
        throw invalid("modifiers are at most 4 of ctrl, alt, shift, cmd")
      }
      return { args: ["key", "--", [...mods.map((m) => MODIFIERS[m as string]!), key].join("+")], timeoutMs: 5000 }
    }
    case "keyboard_hotkey": {
      const keys = a["keys"]
      if (typeof keys !== "string" || !HOTKEYS.test(keys)) throw invalid("keys are key names joined by + (ctrl+c), several separated by spaces")
      return { args: ["key", "--", ...keys.split(" ").map((k) => k.split("+").map((p) => MODIFIERS[p] ?? p).join("+"))], timeoutMs: 5000 }
    }
    default:
      throw invalid("unknown action type")
  }
}

/** One action at a time: each waits for the one before (the gateway already sends them in order). */
let actions: Promise<unknown> = Promise.resolve()

/** A mouse action as XTEST events, sent by the agent itself (no program started); undefined for keyboard actions. */
const pointerEvents = (a: Record<string, unknown>, d: Desktop): Array<PointerEvent> | undefined => {
  const at = (x: unknown, y: unknown): PointerEvent => ({ type: "motion", x: Number(coordinate(x, d.width - 1)), y: Number(coordinate(y, d.height - 1)) })
  const button = (b: unknown) => {
    const n = BUTTONS[typeof b === "string" ? b : "left"]
    if (n === undefined || (b !== undefined && typeof b !== "string")) throw invalid("button is left, right or middle")
    return Number(n)
  }
  const click = (n: number): Array<PointerEvent> => [{ type: "press", button: n }, { type: "release", button: n }]
  switch (a["type"]) {
    case "mouse_move":
      return [at(a["x"], a["y"])]
    case "mouse_click": {
      const n = button(a["button"])
      return [at(a["x"], a["y"]), ...click(n), ...(a["double"] === true ? click(n) : [])]
    }
    case "mouse_drag": {
      const n = button(a["button"])
      return [at(a["start_x"], a["start_y"]), { type: "press", button: n }, at(a["end_x"], a["end_y"]), { type: "release", button: n }]
    }
    case "mouse_scroll": {
      if (a["direction"] !== "up" && a["direction"] !== "down") throw invalid("direction is up or down")
      const amount = intIn(a["amount"] ?? 1, 1, 100, "amount")
      const wheel = a["direction"] === "up" ? 4 : 5
      return [...(a["x"] !== undefined || a["y"] !== undefined ? [at(a["x"], a["y"])] : []), ...Array.from({ length: amount }, () => click(wheel)).flat()]
    }
    default:
      return undefined
  }
}

const act = async (action: Record<string, unknown>): Promise<Protocol.ActionAnswer> => {
  const d = await requireDesktop()
  const pointer = pointerEvents(action, d)
  if (pointer !== undefined) {
    const x = await connect()
    const run = () => x.pointerInput(pointer)
    const done = actions.then(run, run)
    actions = done.catch(() => undefined)
    return { ok: true as const, cursor: await done }
  }
  const { args, text, timeoutMs } = xdotoolArgs(action)
  const xdotool = which(["xdotool"])
  if (xdotool === undefined) throw unsupported("this sandbox's system has no xdotool, so its desktop takes no input")
  const run = async () => {
    const proc = spawn([xdotool, ...args], "pipe")
    if (text !== undefined) {
      proc.stdin!.write(text)
      await proc.stdin!.end()
    } else await proc.stdin!.end()
    const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs)
    const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()])
    clearTimeout(timer)
    if (code !== 0) throw invalid(`the action failed${stderr.trim() === "" ? "" : `: ${stderr.trim().split("\n")[0]!.slice(0, 200)}`}`)
  }
  const done = actions.then(run, run)
  actions = done.catch(() => undefined)
  await done
  const x = await connect()
  return { ok: true as const, cursor: await x.pointer() }
}

// Screenshots -------------------------------------------------------------------------------------------------

const jpeg = async (image: Rgb, quality: number): Promise<Uint8Array> => {
  const ffmpeg = which(["ffmpeg"])
  if (ffmpeg === undefined) throw unsupported("this sandbox's system has no ffmpeg, so it takes no JPEG screenshots")
  // ffmpeg's JPEG scale: 2 (best) to 31 (worst).
  const q = Math.round(31 - ((quality - 1) * 29) / 99)
  const proc = spawn([ffmpeg, "-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", `${image.width}x${image.height}`, "-i", "-", "-frames:v", "1", "-q:v", String(q), "-f", "mjpeg", "-"], "pipe")
  proc.stdin!.write(image.data)
  await proc.stdin!.end()
  const [out, code] = await Promise.all([new Response(proc.stdout).arrayBuffer(), proc.exited])
  if (code !== 0) throw new AgentError(500, "internal", "the JPEG encoder failed")
  return new Uint8Array(out)
}

const screenshot = async (q: Query<Protocol.ScreenshotQuery>): Promise<Response> => {
  const d = await requireDesktop()
  const format = q.get("format") ?? "png"
  if (format !== "png" && format !== "jpeg") throw invalid("format is png or jpeg")
  const quality = intIn(Number(q.get("quality") ?? 85), 1, 100, "quality")
  const scale = Number(q.get("scale") ?? 1)
  if (!(scale >= 0.1 && scale <= 1)) throw invalid("scale is from 0.1 to 1")
  const region = q.has("width")
    ? { x: intIn(Number(q.get("x") ?? 0), 0, d.width - 1, "x"), y: intIn(Number(q.get("y") ?? 0), 0, d.height - 1, "y"), width: intIn(Number(q.get("width")), 1, d.width, "width"), height: intIn(Number(q.get("height")), 1, d.height, "height") }
    : { x: 0, y: 0, width: d.width, height: d.height }
  if (region.x + region.width > d.width || region.y + region.height > d.height) throw invalid(`the region lies outside the ${d.width}x${d.height} screen`)
  const x = await connect()
  let image = await x.image(region.x, region.y, region.width, region.height)
  const pointer = await x.pointer()
  if (q.get("cursor") === "1") {
    const cursor = await x.cursor()
    if (cursor !== undefined) drawCursor(image, cursor, region.x, region.y)
  }
  image = scaleImage(image, scale)
  const bytes = format === "png" ? encodePng(image) : await jpeg(image, quality)
  return new Response(new Blob([bytes as Uint8Array<ArrayBuffer>]), {
    headers: {
      "content-type": format === "png" ? "image/png" : "image/jpeg",
      ...({ "x-width": String(image.width), "x-height": String(image.height), "x-cursor-x": String(pointer.x), "x-cursor-y": String(pointer.y) } satisfies Protocol.ScreenshotHead)
    }
  })
}

// Recordings --------------------------------------------------------------------------------------------------

interface Recording {
  readonly id: string
  readonly file: string
  readonly startedAt: string
  stoppedAt: string | null
  stopping: boolean
  exitCode: number | null
  proc: ReturnType<typeof spawn> | undefined
}

const recordings = new Map<string, Recording>()
const RECORDING_ID = /^[a-f0-9]{32}$/

const recordingState = (r: Recording): "starting" | "recording" | "stopping" | "stopped" | "failed" => {
  if (r.stoppedAt !== null) return r.exitCode === 0 ? "stopped" : "failed"
  if (r.proc === undefined || r.proc.exitCode !== null || r.proc.signalCode !== null) return r.stopping ? "stopping" : "failed"
  if (r.stopping) return "stopping"
  try {
    return fs.statSync(r.file).size > 0 ? "recording" : "starting"
  } catch {
    return "starting"
  }
}

const recordingView = (r: Recording): Protocol.RecordingAnswer => {
  let sizeBytes: number | null = null
  try {
    sizeBytes = fs.statSync(r.file).size
  } catch {}
  const end = r.stoppedAt === null ? Date.now() : Date.parse(r.stoppedAt)
  return { id: r.id, state: recordingState(r), startedAt: r.startedAt, stoppedAt: r.stoppedAt, sizeBytes, durationSeconds: Math.max(0, (end - Date.parse(r.startedAt)) / 1000) }
}

const recordingOf = (id: string) => {
  const r = RECORDING_ID.test(id) ? recordings.get(id) : undefined
  if (r === undefined) throw new AgentError(404, "not_found", "no such recording")
  return r
}

const startRecording = async (): Promise<Recording> => {
  const d = await requireDesktop()
  const ffmpeg = which(["ffmpeg"])
  if (ffmpeg === undefined) throw unsupported("this sandbox's system has no ffmpeg, so it cannot record its desktop")
  fs.mkdirSync(RECORDINGS_DIR, { recursive: true })
  const id = crypto.randomUUID().replaceAll("-", "")
  const file = path.join(RECORDINGS_DIR, `${id}.mp4`)
  // x264 wants even sizes; 10 frames a second is plenty for an agent's desktop and light on the sandbox's CPU.
  const size = `${d.width - (d.width % 2)}x${d.height - (d.height % 2)}`
  const proc = spawn([
    ffmpeg, "-hide_banner", "-loglevel", "error", "-f", "x11grab", "-draw_mouse", "1", "-framerate", "10", "-video_size", size, "-i", `${DISPLAY}.0`,
    "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-movflags", "+faststart", "-y", file
  ], "pipe")
  const r: Recording = { id, file, startedAt: new Date().toISOString(), stoppedAt: null, stopping: false, exitCode: null, proc }
  void proc.exited.then((code) => {
    r.exitCode = code
    if (!r.stopping) r.stoppedAt = new Date().toISOString()
  })
  recordings.set(id, r)
  return r
}

/** Asks ffmpeg to finish (`q` on its input: it writes the mp4's index and exits 0), SIGKILL if it does not. */
const stopRecording = async (r: Recording) => {
  if (r.stoppedAt !== null || r.proc === undefined) return r
  r.stopping = true
  const proc = r.proc
  try {
    proc.stdin!.write("q")
    await proc.stdin!.end()
  } catch {}
  const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000)
  r.exitCode = await proc.exited
  clearTimeout(timer)
  r.stoppedAt = new Date().toISOString()
  return r
}

// Routes ------------------------------------------------------------------------------------------------------

const desktopView = (d: Desktop | undefined): Protocol.DesktopAnswer =>
  d === undefined
    ? { running: false, display: DISPLAY, width: null, height: null, liveViewPort: null }
    : { running: true, display: DISPLAY, width: d.width, height: d.height, liveViewPort: d.liveView ? LIVE_VIEW_PORT : null }

export const desktopRoute = (request: Request, parts: ReadonlyArray<string>, q: URLSearchParams): Promise<Response> =>
  route(request, parts, q).catch((e: unknown) => {
    // The display's own failures in its own words (they are ours, never an engine's), not a bare "failed".
    throw e instanceof DisplayError ? new AgentError(500, "internal", e.message) : e
  })

const route = async (request: Request, parts: ReadonlyArray<string>, q: URLSearchParams): Promise<Response> => {
  const method = request.method
  const [, what, id, verb] = parts
  if (what === undefined) {
    if (method === "POST") {
      const size: Query<Protocol.DesktopQuery> = q
      const width = intIn(Number(size.get("width") ?? 1280), 64, MAX_WIDTH, "width")
      const height = intIn(Number(size.get("height") ?? 800), 64, MAX_HEIGHT, "height")
      const d = await start(width, height)
      return json(desktopView(d))
    }
    return json(desktopView(await running()))
  }
  if (what === "action" && method === "POST") {
    const body = (await request.json().catch(() => null)) as unknown
    if (typeof body !== "object" || body === null || Array.isArray(body)) throw invalid("the action is a JSON object")
    return json(await act(body as Record<string, unknown>))
  }
  if (what === "screenshot" && method === "GET") return screenshot(q)
  if (what === "recordings") {
    if (id === undefined && method === "POST") return json(recordingView(await startRecording()))
    if (id === undefined && method === "GET") return json({ recordings: [...recordings.values()].map(recordingView) } satisfies Protocol.RecordingListAnswer)
    if (id !== undefined && verb === undefined && method === "GET") return json(recordingView(recordingOf(id)))
    if (id !== undefined && verb === "stop" && method === "POST") return json(recordingView(await stopRecording(recordingOf(id))))
  }
  throw new AgentError(404, "not_found", "no such route")
}
