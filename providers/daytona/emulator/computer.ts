/**
 * The Daytona emulator's computer use (`/toolbox/{id}/computeruse/…`), as the daemon serves it (apps/daemon
 * pkg/toolbox/computeruse: handler.go, interface.go, recording.go), over the local runtime's desktop: start and
 * status, mouse (position, move, click, drag, scroll), keyboard (type, key, hotkey), screenshots (whole, region,
 * compressed), display info, and recordings (start, stop, list, get, download). Its answers are the daemon's:
 * `{error}` with 400 for a failed call (503 for a failed start), base64 images with `cursorPosition` and
 * `sizeBytes`, recordings with `status` recording | completed | failed.
 */
import { Schema } from "effect"
import type { DesktopAction, DesktopRecording, LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { decodeJsonBody, route, runOrThrow as run } from "../../core/emulator/server.ts"
import type { EmulatedSandbox } from "./books.ts"
import { json } from "./wire.ts"

/** The daemon's desktop: 1024×768 in its default image; ours is the API's usual 1280×800. */
const SCREEN = { width: 1280, height: 800 } as const

export interface ComputerCall {
  readonly request: Request
  readonly url: URL
  readonly sandbox: EmulatedSandbox
}

/**
 * The daemon answers a failed computer-use call with 400 and `{error}` (a failed start with 503). What cannot
 * succeed however often it is tried (no X server in the sandbox's system, a point outside the screen) is 400.
 */
const failed = (e: unknown, status = 400) => {
  const kind = (e as { kind?: unknown } | null)?.kind
  if (typeof kind !== "string") throw e
  return json({ error: String((e as { message?: unknown }).message) }, kind === "not_found" ? 404 : kind === "conflict" || kind === "invalid" ? 400 : status)
}

const attempt = async (f: () => Promise<Response>, status = 400) => {
  try {
    return await f()
  } catch (e) {
    return failed(e, status)
  }
}

/** The daemon's request bodies (pkg/toolbox/computeruse: MouseMoveRequest …): what a field may be is its Go type's. */
const Int = Schema.Number.pipe(Schema.int())
const Button = Schema.optionalWith(Schema.Literal("left", "right", "middle"), { default: () => "left" as const })
const Bodies = {
  move: Schema.Struct({ x: Int, y: Int }),
  click: Schema.Struct({ x: Int, y: Int, button: Button, double: Schema.optionalWith(Schema.Boolean, { default: () => false }) }),
  drag: Schema.Struct({ startX: Int, startY: Int, endX: Int, endY: Int, button: Button }),
  scroll: Schema.Struct({ x: Int, y: Int, direction: Schema.Literal("up", "down"), amount: Schema.optionalWith(Int, { default: () => 1 }) }),
  type: Schema.Struct({ text: Schema.String, delay: Schema.optionalWith(Int, { default: () => 0 }) }),
  key: Schema.Struct({ key: Schema.String, modifiers: Schema.optionalWith(Schema.Array(Schema.Literal("ctrl", "alt", "shift", "cmd")), { default: () => [] }) }),
  hotkey: Schema.Struct({ keys: Schema.String }),
  stop: Schema.Struct({ id: Schema.String.pipe(Schema.minLength(1)) })
}

/** The call with its body decoded; a body that is not of its shape gets the daemon's 400 `{error}` (an empty one reads as `{}`). */
const withBody = async <A, I>(request: Request, schema: Schema.Schema<A, I>, f: (body: A) => Promise<Response>) => {
  const decoded = await decodeJsonBody(request, schema, { emptyIsObject: true })
  return decoded.ok ? f(decoded.value) : json({ error: decoded.message }, 400)
}
const queryInt = (url: URL, name: string) => {
  const raw = url.searchParams.get(name)
  return raw === null || !/^-?\d{1,9}$/.test(raw) ? Number.NaN : Number(raw)
}

const recordingWire = (r: DesktopRecording) => ({
  id: r.id,
  fileName: `${r.id}.mp4`,
  filePath: r.path,
  startTime: r.startedAt,
  ...(r.stoppedAt === null ? {} : { endTime: r.stoppedAt }),
  status: r.state === "stopped" ? "completed" : r.state === "failed" ? "failed" : "recording",
  durationSeconds: r.durationSeconds,
  ...(r.sizeBytes === null ? {} : { sizeBytes: r.sizeBytes })
})

export const makeComputerUse = (runtime: LocalRuntimeShape) => {
  const act = ({ sandbox }: ComputerCall, action: DesktopAction) =>
    attempt(async () => {
      const done = await run(runtime.desktopAction(sandbox.id, action))
      return json(action.type.startsWith("keyboard") ? {} : action.type === "mouse_scroll" ? { success: true } : done.cursor)
    })

  const screenshot = (compressed: boolean, region: boolean) => ({ sandbox, url }: ComputerCall) =>
    attempt(async () => {
      const q = url.searchParams
      const format = compressed && q.get("format") === "jpeg" ? "jpeg" : "png"
      // As the daemon: a quality or scale outside its range is ignored (85 and 1.0).
      const quality = Number(q.get("quality"))
      const scale = Number(q.get("scale"))
      const shot = await run(runtime.screenshot(sandbox.id, {
        format,
        showCursor: q.get("showCursor") === "true",
        ...(compressed ? { quality: Number.isInteger(quality) && quality >= 1 && quality <= 100 ? quality : 85, scale: scale >= 0.1 && scale <= 1 ? scale : 1 } : {}),
        ...(region ? { region: { x: queryInt(url, "x"), y: queryInt(url, "y"), width: queryInt(url, "width"), height: queryInt(url, "height") } } : {})
      }))
      return json({ screenshot: Buffer.from(shot.data).toString("base64"), cursorPosition: shot.cursor, sizeBytes: shot.data.length })
    })

  return [
    route("POST", "/computeruse/start", ({ sandbox }: ComputerCall) =>
      attempt(async () => {
        await run(runtime.startDesktop(sandbox.id, SCREEN))
        const up = { running: true, priority: 100, autoRestart: true }
        return json({ message: "Computer use processes started successfully", status: { xvfb: up, xfce4: { ...up, priority: 200 }, x11vnc: { ...up, priority: 300 }, novnc: { ...up, priority: 400 } } })
      }, 503)),
    route("GET", "/computeruse/status", ({ sandbox }: ComputerCall) =>
      attempt(async () => json({ status: (await run(runtime.desktop(sandbox.id)))._tag === "Some" ? "active" : "inactive" }))),
    route("GET", "/computeruse/display/info", ({ sandbox }: ComputerCall) =>
      attempt(async () => {
        const desktop = await run(runtime.desktop(sandbox.id))
        if (desktop._tag === "None") return json({ error: "the desktop is not running" }, 400)
        return json({ displays: [{ id: 0, x: 0, y: 0, width: desktop.value.width, height: desktop.value.height, isActive: true }] })
      })),
    route("GET", "/computeruse/mouse/position", ({ sandbox }: ComputerCall) =>
      attempt(async () => {
        // The pointer stays where it is: a move to where it already is answers its position.
        const shot = await run(runtime.screenshot(sandbox.id, { format: "png", showCursor: false, region: { x: 0, y: 0, width: 1, height: 1 } }))
        return json(shot.cursor)
      })),
    route("POST", "/computeruse/mouse/move", (call: ComputerCall) =>
      withBody(call.request, Bodies.move, (b) => act(call, { type: "mouse_move", x: b.x, y: b.y }))),
    route("POST", "/computeruse/mouse/click", (call: ComputerCall) =>
      withBody(call.request, Bodies.click, (b) => act(call, { type: "mouse_click", x: b.x, y: b.y, button: b.button, double: b.double }))),
    route("POST", "/computeruse/mouse/drag", (call: ComputerCall) =>
      withBody(call.request, Bodies.drag, (b) => act(call, { type: "mouse_drag", start_x: b.startX, start_y: b.startY, end_x: b.endX, end_y: b.endY, button: b.button }))),
    route("POST", "/computeruse/mouse/scroll", (call: ComputerCall) =>
      withBody(call.request, Bodies.scroll, (b) => act(call, { type: "mouse_scroll", direction: b.direction, amount: b.amount, x: b.x, y: b.y }))),
    route("POST", "/computeruse/keyboard/type", (call: ComputerCall) =>
      withBody(call.request, Bodies.type, (b) => act(call, { type: "keyboard_type", text: b.text, delay_ms: b.delay }))),
    route("POST", "/computeruse/keyboard/key", (call: ComputerCall) =>
      withBody(call.request, Bodies.key, (b) => act(call, { type: "keyboard_key", key: b.key, modifiers: b.modifiers }))),
    route("POST", "/computeruse/keyboard/hotkey", (call: ComputerCall) =>
      withBody(call.request, Bodies.hotkey, (b) => act(call, { type: "keyboard_hotkey", keys: b.keys }))),
    route("GET", "/computeruse/screenshot", screenshot(false, false)),
    route("GET", "/computeruse/screenshot/region", screenshot(false, true)),
    route("GET", "/computeruse/screenshot/compressed", screenshot(true, false)),
    route("GET", "/computeruse/screenshot/region/compressed", screenshot(true, true)),
    route("POST", "/computeruse/recordings/start", ({ sandbox }: ComputerCall) =>
      attempt(async () => {
        const r = recordingWire(await run(runtime.startRecording(sandbox.id)))
        return json({ id: r.id, fileName: r.fileName, filePath: r.filePath, startTime: r.startTime, status: r.status }, 201)
      })),
    route("POST", "/computeruse/recordings/stop", ({ request, sandbox }: ComputerCall) =>
      withBody(request, Bodies.stop, ({ id }) =>
        attempt(async () => {
          const r = recordingWire(await run(runtime.stopRecording(sandbox.id, id)))
          return json({ id: r.id, filePath: r.filePath, durationSeconds: r.durationSeconds, status: r.status })
        }, 500))),
    route("GET", "/computeruse/recordings", ({ sandbox }: ComputerCall) =>
      attempt(async () => json({ recordings: (await run(runtime.listRecordings(sandbox.id))).map(recordingWire) }), 500)),
    route("GET", "/computeruse/recordings/:id", ({ sandbox }: ComputerCall, { id }: Record<string, string | undefined>) =>
      attempt(async () => json(recordingWire(await run(runtime.recording(sandbox.id, id ?? "")))), 500)),
    route("GET", "/computeruse/recordings/:id/download", ({ sandbox }: ComputerCall, { id }: Record<string, string | undefined>) =>
      attempt(async () => {
        const r = await run(runtime.recording(sandbox.id, id ?? ""))
        const file = await run(runtime.readFileStream(sandbox.id, r.path, 0, Number.MAX_SAFE_INTEGER))
        return new Response(file.stream, { headers: { "content-type": "video/mp4", "content-length": String(file.length) } })
      }, 500))
  ]
}
