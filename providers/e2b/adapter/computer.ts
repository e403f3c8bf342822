/**
 * E2B computer use, on a sandbox of E2B's `desktop` template, the way E2B's Desktop SDK (`@e2b/desktop`) drives it:
 * every step is an envd command (`process.Process/Start`, `/bin/bash -l -c …`, `DISPLAY` set).
 *
 * - start: `Xvfb :0 … -nolisten tcp -nolisten unix` in the background, until `xdpyinfo` answers, then
 *   `startxfce4` in the background (the SDK's `_start`); each is tagged, so a second start finds them running.
 * - actions: `xdotool` (`mousemove`, `click [--repeat 2] <button>`, `mousedown`/`mouseup` for a drag,
 *   `click --repeat <n> 4|5` to scroll, `type --delay`, `key`), chained in one xdotool with `getmouselocation` for
 *   the pointer. Not the SDK's `mousemove --sync`: it waits for a motion that never comes when the pointer is
 *   already there; one X connection runs its requests in order, so what follows sees the pointer moved anyway.
 * - screenshots: `scrot` into a file (`--pointer`, `--autoselect` for a region, `--quality`, `--thumb` for a
 *   scale), then `GET /files` and `filesystem.Filesystem/Remove`, as the SDK's `screenshot()`.
 * - recordings (the SDK has none; the template has ffmpeg): `ffmpeg -f x11grab` → H.264 mp4 under /tmp, a tagged
 *   background process; stop is envd's SIGTERM (ffmpeg then writes the file's index and exits); the download is
 *   `GET /files`.
 *
 * What comes back is the sandbox's: a command's output is read at most OUTPUT_MAX_BYTES, an image at most
 * SCREENSHOT_MAX_BYTES and only as the format asked for (by its signature), a recording at most the caller's limit
 * and only as an mp4. Coordinates are checked against the screen (`xdotool getdisplaygeometry`, asked once per
 * sandbox), as xdotool itself would silently clamp them.
 */
import { HttpClientRequest } from "@effect/platform"
import { Effect, Stream } from "effect"
import { imageFormatOf, isMp4, SCREENSHOT_MAX_BYTES } from "../../../src/domain/Computer.ts"
import type { ComputerDriver, ProviderRecording, ProviderSandbox } from "../../../src/providers/Provider.ts"
import { readBodyAtMost } from "../../core/wire.ts"
import { type ConnectErrorBody, encodeEnvelope, END_STREAM, EnvelopeDecoder, STREAM_CONTENT_TYPE, trailerError } from "../connect.ts"
import type { E2BContext } from "./context.ts"
import { connectKind, Empty, ProcessList } from "./wire.ts"

/** The display the SDK starts (`Sandbox.create` sets `DISPLAY=:0`). */
export const DESKTOP_DISPLAY = ":0"
/** The API's usual screen. */
const SCREEN = { width: 1280, height: 800 } as const
const OUTPUT_MAX_BYTES = 64 * 1024
/** A command's time (envd's deadline, `Connect-Timeout-Ms`) unless it says otherwise. */
const COMMAND_TIMEOUT_MS = 60_000
/** A typed piece stays within this at the sandbox (a call's limit is a minute), and its text within one argument. */
const TYPING_PIECE_MS = 20_000
const TYPING_PIECE_CHARS = 2_000
const XVFB_TAG = "sgw-desktop-xvfb"
const SESSION_TAG = "sgw-desktop-session"
const RECORDINGS_DIR = "/tmp/sgw-recordings"
/** `<start time, base 36>-<random hex>`: the start time survives a gateway restart, for the duration. */
const RECORDING_ID = /^([0-9a-z]{1,11})-([0-9a-f]{16})$/

/** Single-quoted for the shell: the only character to escape is the quote itself. */
const quote = (s: string) => `'${s.replaceAll("'", `'"'"'`)}'`

interface CommandResult {
  readonly exitCode: number | null
  readonly stdout: string
  readonly stderr: string
}

const BUTTONS = { left: "1", middle: "2", right: "3" } as const
const MODIFIERS: Record<string, string> = { ctrl: "ctrl", alt: "alt", shift: "shift", cmd: "super" }
const hotkey = (combination: string) => combination.split("+").map((k) => MODIFIERS[k] ?? k).join("+")

export const makeComputer = (ctx: E2BContext): ComputerDriver & { readonly forget: (sandboxId: string) => void } => {
  const { envd, envdRequest, fail, unary, userHeader, userParam } = ctx
  const geometry = new Map<string, { readonly width: number; readonly height: number }>()

  /**
   * One command through envd's `process.Process/Start`. In the foreground it is read to its end (output bounded);
   * in the background only to its start event, then let go (envd keeps it running, as the SDK's `background`).
   */
  const command = (sandbox: ProviderSandbox, script: string, options: { readonly tag?: string; readonly background?: boolean; readonly timeoutMs?: number } = {}) => {
    // envd ends a foreground command at its deadline; the stream is read no longer than that either way.
    const timeoutMs = options.background === true ? undefined : options.timeoutMs ?? COMMAND_TIMEOUT_MS
    return Effect.gen(function*() {
      const response = yield* envd(
        sandbox,
        (a) =>
          envdRequest(sandbox, a, "POST", "/process.Process/Start").pipe(
            HttpClientRequest.setHeaders({
              "connect-protocol-version": "1",
              ...userHeader(a),
              ...(timeoutMs === undefined ? {} : { "connect-timeout-ms": String(timeoutMs) })
            }),
            HttpClientRequest.bodyUint8Array(
              encodeEnvelope({ process: { cmd: "/bin/bash", args: ["-l", "-c", script], envs: { DISPLAY: DESKTOP_DISPLAY } }, ...(options.tag === undefined ? {} : { tag: options.tag }) }),
              STREAM_CONTENT_TYPE
            )
          ),
        "process.Process/Start",
        { mutating: true }
      )
      if (!(response.headers["content-type"] ?? "").startsWith(STREAM_CONTENT_TYPE)) {
        return yield* fail("unavailable", `e2b process.Process/Start answered ${response.headers["content-type"] ?? "no content type"}, not a Connect stream`)
      }
      const decoder = new EnvelopeDecoder()
      const out = { stdout: [] as Array<Buffer>, stderr: [] as Array<Buffer>, bytes: 0 }
      let result: CommandResult | null = null
      let started = false
      let error: ConnectErrorBody | null = null
      yield* response.stream.pipe(
        Stream.mapError((e) => fail("unavailable", `the e2b command stream broke: ${e.message}`)),
        Stream.mapConcatEffect((chunk) => Effect.try({ try: () => decoder.push(chunk), catch: (e) => fail("unavailable", `e2b sent a bad Connect stream: ${(e as Error).message}`) })),
        Stream.takeUntil((envelope) => {
          if ((envelope.flags & END_STREAM) !== 0) {
            error = trailerError(envelope.message)
            return true
          }
          const event = (envelope.message as { event?: Record<string, unknown> } | null)?.event ?? {}
          const data = event["data"] as { stdout?: unknown; stderr?: unknown } | undefined
          const end = event["end"] as { exitCode?: unknown; exited?: unknown } | undefined
          if (event["start"] !== undefined) started = true
          else if (data !== undefined) {
            for (const stream of ["stdout", "stderr"] as const) {
              const raw = data[stream]
              if (typeof raw !== "string" || out.bytes >= OUTPUT_MAX_BYTES) continue
              const bytes = Buffer.from(raw, "base64").subarray(0, OUTPUT_MAX_BYTES - out.bytes)
              out[stream].push(bytes)
              out.bytes += bytes.length
            }
          } else if (end !== undefined) {
            // Protobuf JSON leaves out defaults: no `exitCode` means 0; not `exited` means a signal ended it.
            result = { exitCode: end.exited === true ? Number(end.exitCode ?? 0) : null, stdout: Buffer.concat(out.stdout).toString("utf8"), stderr: Buffer.concat(out.stderr).toString("utf8") }
          }
          return options.background === true ? started : result !== null
        }),
        Stream.runDrain,
        Effect.timeoutFail({
          duration: (timeoutMs ?? COMMAND_TIMEOUT_MS) + 5_000,
          onTimeout: () => fail("unavailable", `the e2b command did not ${options.background === true ? "start" : "end"} in time`)
        })
      )
      if (options.background === true && started) return { exitCode: null, stdout: "", stderr: "" } satisfies CommandResult
      if (result !== null) return result as CommandResult
      const problem = error as ConnectErrorBody | null
      return yield* (problem === null
        ? fail("unavailable", "the e2b command stream ended without the command's exit")
        : fail(connectKind(problem.code), `e2b command failed: ${problem.code}: ${problem.message}`))
    })
  }

  /** A command that must succeed: its failure is the desktop refusing (its first line of stderr says why). */
  const must = (sandbox: ProviderSandbox, script: string, what: string, timeoutMs?: number) =>
    Effect.flatMap(command(sandbox, script, timeoutMs === undefined ? {} : { timeoutMs }), (r) =>
      r.exitCode === 0
        ? Effect.succeed(r.stdout)
        : Effect.fail(fail("invalid_request", `the desktop refused to ${what}${r.stderr.trim() === "" ? ` (exit ${r.exitCode ?? "by a signal"})` : `: ${r.stderr.trim().split("\n")[0]!.slice(0, 200)}`}`)))

  /** `getmouselocation`'s `x:… y:…`, when it reads as a point a screen could have. */
  const cursorOf = (stdout: string) => {
    const m = /x:(\d{1,5})\s+y:(\d{1,5})\b/.exec(stdout)
    return m === null ? null : { x: Number(m[1]), y: Number(m[2]) }
  }

  const screenOf = (sandbox: ProviderSandbox) =>
    Effect.suspend(() => {
      const known = geometry.get(sandbox.resourceId)
      if (known !== undefined) return Effect.succeed(known)
      return Effect.flatMap(must(sandbox, "xdotool getdisplaygeometry", "tell its size"), (stdout) => {
        const m = /^(\d{1,5})\s+(\d{1,5})\s*$/.exec(stdout)
        if (m === null) return Effect.fail(fail("unavailable", "e2b's desktop did not say its size"))
        const size = { width: Number(m[1]), height: Number(m[2]) }
        geometry.set(sandbox.resourceId, size)
        return Effect.succeed(size)
      })
    })
  /** `x y`, once checked to be on the screen. */
  const point = (sandbox: ProviderSandbox, x: number, y: number) =>
    Effect.flatMap(screenOf(sandbox), (s) =>
      x < s.width && y < s.height ? Effect.succeed(`${x} ${y}`) : Effect.fail(fail("invalid_request", `(${x}, ${y}) is outside the ${s.width}x${s.height} screen`)))

  const pointer = (sandbox: ProviderSandbox, xdotool: string, what: string) =>
    Effect.map(must(sandbox, `xdotool ${xdotool} getmouselocation`, what), (stdout) => ({ cursor: cursorOf(stdout) }))

  const running = (sandbox: ProviderSandbox) => Effect.map(unary(sandbox, "process.Process/List", {}, ProcessList), (l) => new Set(l.processes.map((p) => p.tag)))

  const start: ComputerDriver["start"] = (sandbox) =>
    Effect.gen(function*() {
      const tags = yield* running(sandbox)
      if (!tags.has(XVFB_TAG)) {
        yield* command(sandbox, `Xvfb ${DESKTOP_DISPLAY} -ac -screen 0 ${SCREEN.width}x${SCREEN.height}x24 -retro -dpi 96 -nolisten tcp -nolisten unix`, { tag: XVFB_TAG, background: true })
      }
      // As the SDK: the display answers within 10 s.
      const up = yield* command(sandbox, `for i in $(seq 100); do xdpyinfo -display ${DESKTOP_DISPLAY} >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1`)
      if (up.exitCode !== 0) return yield* fail("unsupported", "its display server did not start (is the sandbox of E2B's desktop template?)")
      if (!tags.has(SESSION_TAG)) yield* command(sandbox, "startxfce4", { tag: SESSION_TAG, background: true })
      // Its size, asked now: the screen checks need it.
      geometry.delete(sandbox.resourceId)
      yield* screenOf(sandbox)
    })

  const action: ComputerDriver["action"] = (sandbox, a) => {
    switch (a.type) {
      case "mouse_move":
        return Effect.flatMap(point(sandbox, a.x, a.y), (at) => pointer(sandbox, `mousemove ${at}`, "move the mouse"))
      case "mouse_click":
        return Effect.flatMap(point(sandbox, a.x, a.y), (at) => pointer(sandbox, `mousemove ${at} click ${a.double ? "--repeat 2 " : ""}${BUTTONS[a.button]}`, "click"))
      case "mouse_drag":
        return Effect.flatMap(
          Effect.all([point(sandbox, a.start_x, a.start_y), point(sandbox, a.end_x, a.end_y)]),
          ([from, to]) => pointer(sandbox, `mousemove ${from} mousedown ${BUTTONS[a.button]} mousemove ${to} mouseup ${BUTTONS[a.button]}`, "drag")
        )
      case "mouse_scroll": {
        const wheel = `click --repeat ${a.amount} ${a.direction === "up" ? 4 : 5}`
        return a.x !== undefined && a.y !== undefined
          ? Effect.flatMap(point(sandbox, a.x, a.y), (at) => pointer(sandbox, `mousemove ${at} ${wheel}`, "scroll"))
          : pointer(sandbox, wheel, "scroll")
      }
      case "keyboard_type":
        return Effect.gen(function*() {
          // In pieces, as the SDK's `write`: each within one argument and well within a call's time.
          const perPiece = Math.max(1, Math.min(TYPING_PIECE_CHARS, Math.floor(TYPING_PIECE_MS / (a.delay_ms + 5))))
          const chars = [...a.text]
          let out = ""
          for (let i = 0; i < chars.length; i += perPiece) {
            const last = i + perPiece >= chars.length
            out = yield* must(sandbox, `xdotool type --delay ${a.delay_ms} -- ${quote(chars.slice(i, i + perPiece).join(""))}${last ? " && xdotool getmouselocation" : ""}`, "type", TYPING_PIECE_MS + 10_000)
          }
          return { cursor: cursorOf(out) }
        })
      case "keyboard_key":
        return pointer(sandbox, `key -- ${quote([...a.modifiers.map((m) => MODIFIERS[m]!), a.key].join("+"))}`, "press a key")
      case "keyboard_hotkey":
        return pointer(sandbox, `key -- ${a.keys.split(" ").map((k) => quote(hotkey(k))).join(" ")}`, "press keys")
    }
  }

  const readBounded = (sandbox: ProviderSandbox, path: string, maxBytes: number, what: string) =>
    envd(sandbox, (a) => envdRequest(sandbox, a, "GET", "/files").pipe(HttpClientRequest.setUrlParam("path", path), userParam(a)), what).pipe(
      Effect.flatMap((response) =>
        readBodyAtMost(response, maxBytes, {
          unreadable: (message) => fail("unavailable", `e2b ${what} could not be read: ${message}`),
          tooLarge: () => fail("invalid_request", `e2b's ${what} is larger than ${maxBytes} bytes`)
        })
      )
    )
  const remove = (sandbox: ProviderSandbox, path: string) => Effect.ignore(unary(sandbox, "filesystem.Filesystem/Remove", { path }, Empty, true))

  const screenshot: ComputerDriver["screenshot"] = (sandbox, input) =>
    Effect.gen(function*() {
      const screen = yield* screenOf(sandbox)
      const area = input.region ?? { x: 0, y: 0, ...screen }
      if (area.x + area.width > screen.width || area.y + area.height > screen.height) {
        return yield* fail("invalid_request", `the region lies outside the ${screen.width}x${screen.height} screen`)
      }
      const ext = input.format === "png" ? "png" : "jpg"
      const name = `/tmp/sgw-screenshot-${crypto.randomUUID()}`
      const thumb = input.scale < 1 ? `${Math.max(1, Math.round(area.width * input.scale))}x${Math.max(1, Math.round(area.height * input.scale))}` : null
      const flags = [
        "-o",
        "-z",
        ...(input.showCursor ? ["--pointer"] : []),
        ...(input.region === undefined ? [] : [`--autoselect ${area.x},${area.y},${area.width},${area.height}`]),
        ...(input.format === "jpeg" ? [`--quality ${input.quality}`] : []),
        ...(thumb === null ? [] : [`--thumb ${thumb}`])
      ]
      const stdout = yield* must(sandbox, `scrot ${flags.join(" ")} ${name}.${ext} && xdotool getmouselocation`, "take a screenshot")
      // With a scale, the image is scrot's thumbnail (`<name>-thumb.<ext>`).
      const file = thumb === null ? `${name}.${ext}` : `${name}-thumb.${ext}`
      const data = yield* readBounded(sandbox, file, SCREENSHOT_MAX_BYTES, "screenshot").pipe(
        Effect.ensuring(Effect.forkDaemon(Effect.all([remove(sandbox, `${name}.${ext}`), ...(thumb === null ? [] : [remove(sandbox, file)])])))
      )
      // What the sandbox's own commands made: trying again would make it again.
      if (imageFormatOf(data) !== input.format) return yield* fail("invalid_request", `e2b's screenshot is not the ${input.format} image asked for`)
      return { format: input.format, data, cursor: cursorOf(stdout) }
    })

  const recordingFile = (id: string) => `${RECORDINGS_DIR}/${id}.mp4`
  const recordingTag = (id: string) => `sgw-recording-${id}`
  const parseId = (id: string) => {
    const m = RECORDING_ID.exec(id)
    return m === null ? Effect.fail(fail("not_found", `no recording ${JSON.stringify(id.slice(0, 80))}`)) : Effect.succeed(parseInt(m[1]!, 36))
  }
  /** What the sandbox shows of a recording: its ffmpeg still running, or its file. */
  const recordingState = (sandbox: ProviderSandbox, id: string, stopping = false) =>
    Effect.gen(function*() {
      const startedAt = yield* parseId(id)
      const live = (yield* running(sandbox)).has(recordingTag(id))
      const entry = yield* ctx.statOrNull(sandbox, recordingFile(id))
      const size = Number(entry?.size ?? 0)
      const state: ProviderRecording["state"] = live ? (stopping ? "stopping" : size > 0 ? "recording" : "starting") : size > 0 ? "stopped" : "failed"
      return { recordingId: id, state, durationSeconds: Math.max(0, (Date.now() - startedAt) / 1000) } satisfies ProviderRecording
    })

  return {
    /** A destroyed sandbox's screen size is forgotten with it. */
    forget: (sandboxId) => void geometry.delete(sandboxId),
    start,
    action,
    screenshot,
    startRecording: (sandbox) =>
      Effect.gen(function*() {
        const screen = yield* screenOf(sandbox)
        const id = `${Date.now().toString(36)}-${Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex")}`
        yield* command(
          sandbox,
          `mkdir -p ${RECORDINGS_DIR} && exec ffmpeg -hide_banner -loglevel error -nostdin -f x11grab -draw_mouse 1 -framerate 10 -video_size ${screen.width}x${screen.height} -i ${DESKTOP_DISPLAY} ` +
            `-c:v libx264 -preset ultrafast -pix_fmt yuv420p -movflags +faststart -y ${recordingFile(id)}`,
          { tag: recordingTag(id), background: true }
        )
        // Recording once ffmpeg writes its file (a stop before that would leave none).
        for (let tries = 0; tries < 200; tries++) {
          const now = yield* recordingState(sandbox, id)
          if (now.state !== "starting") return now
          yield* Effect.sleep("100 millis")
        }
        yield* Effect.ignore(unary(sandbox, "process.Process/SendSignal", { process: { tag: recordingTag(id) }, signal: "SIGNAL_SIGKILL" }, Empty, true))
        return yield* fail("unavailable", "e2b's recording did not start within 20 s")
      }),
    getRecording: (sandbox, id) => recordingState(sandbox, id),
    stopRecording: (sandbox, id) =>
      Effect.gen(function*() {
        yield* parseId(id)
        // SIGTERM: ffmpeg finishes the file (its index) and exits; one already gone is fine.
        yield* unary(sandbox, "process.Process/SendSignal", { process: { tag: recordingTag(id) }, signal: "SIGNAL_SIGTERM" }, Empty, true).pipe(
          Effect.catchIf((e) => e.kind === "not_found", () => Effect.void)
        )
        const stoppedAt = Date.now()
        for (let tries = 0; tries < 300; tries++) {
          const now = yield* recordingState(sandbox, id, true)
          if (now.state !== "stopping") return { ...now, durationSeconds: Math.max(0, (stoppedAt - (yield* parseId(id))) / 1000) }
          yield* Effect.sleep("100 millis")
        }
        return yield* fail("unavailable", "e2b's recording did not stop within 30 s")
      }),
    downloadRecording: (sandbox, id, maxBytes) =>
      Effect.gen(function*() {
        yield* parseId(id)
        const bytes = yield* readBounded(sandbox, recordingFile(id), maxBytes, "recording").pipe(
          Effect.mapError((e) => (e.kind === "invalid_request" ? fail("invalid_request", `the recording is larger than the ${maxBytes} bytes the gateway keeps`) : e))
        )
        if (!isMp4(bytes)) return yield* fail("customer", "e2b's recording is not an mp4 (what the sandbox made: final)")
        return bytes
      })
  }
}
