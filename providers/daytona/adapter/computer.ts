/**
 * Daytona computer use, through the toolbox's computer-use API (apps/daemon pkg/toolbox/computeruse):
 * `POST /computeruse/start` (the desktop: Xvfb, xfce4, x11vnc, novnc), `mouse/{move,click,drag,scroll,position}`,
 * `keyboard/{type,key,hotkey}`, `screenshot[/region][/compressed]` (base64 with `cursorPosition`), and
 * `recordings/{start,stop,{id},{id}/download}`.
 *
 * What comes back is the sandbox's: a screenshot's JSON is read at most SCREENSHOT_MAX_BYTES (as base64, plus a
 * margin) and its image must be the format asked for by its signature; a recording's mp4 is read at most the
 * caller's limit and must start with its `ftyp` box. Typing a long text goes in pieces that each finish well
 * within one call's time limit (the daemon answers once it has typed).
 */
import { HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Effect, Schema } from "effect"
import { imageFormatOf, isMp4, SCREENSHOT_MAX_BYTES } from "../../../src/domain/Computer.ts"
import { readBodyAtMost } from "../../core/wire.ts"
import type { ComputerDriver, ProviderRecording, ProviderSandbox } from "../../../src/providers/Provider.ts"
import type { DaytonaContext } from "./wire.ts"

const Position = Schema.Struct({ x: Schema.Number, y: Schema.Number })
const WireScreenshot = Schema.Struct({ screenshot: Schema.String, cursorPosition: Schema.optional(Schema.NullOr(Position)), sizeBytes: Schema.optional(Schema.Number) })
const WireRecording = Schema.Struct({ id: Schema.String, status: Schema.String, durationSeconds: Schema.optional(Schema.NullOr(Schema.Number)) })

/** The screenshot's JSON: the image as base64 plus its few fields. */
const SCREENSHOT_ANSWER_BYTES = Math.ceil(SCREENSHOT_MAX_BYTES / 3) * 4 + 4096
/** A typed piece's time at the daemon stays within this (a call's limit is a minute). */
const TYPING_PIECE_MS = 20_000

const recordingState = (status: string): ProviderRecording["state"] =>
  status === "recording" ? "recording" : status === "completed" ? "stopped" : status === "failed" ? "failed" : status === "stopping" ? "stopping" : "starting"

export const makeComputer = (ctx: DaytonaContext): ComputerDriver => {
  const { decode, fail, toolbox } = ctx
  const post = (sandbox: ProviderSandbox, path: string, what: string, body: unknown) =>
    toolbox(sandbox, "POST", path, what, (r) => HttpClientRequest.bodyUnsafeJson(r, body))
  const position = (response: HttpClientResponse.HttpClientResponse, what: string) =>
    Effect.map(decode(Position, what)(response), (p) => ({ cursor: { x: Math.round(p.x), y: Math.round(p.y) } }))
  /** JSON read at most `cap` bytes (the sandbox answers it), then decoded. */
  const boundedJson = <A, I>(response: HttpClientResponse.HttpClientResponse, cap: number, schema: Schema.Schema<A, I>, what: string) =>
    readBodyAtMost(response, cap, {
      unreadable: (message) => fail("unavailable", `daytona ${what} could not be read: ${message}`),
      tooLarge: () => fail("invalid_request", `daytona ${what} is larger than ${cap} bytes`)
    }).pipe(
      Effect.flatMap((bytes) => Effect.try({ try: () => JSON.parse(Buffer.from(bytes).toString("utf8")) as unknown, catch: () => fail("unavailable", `daytona ${what} is not JSON`) })),
      Effect.flatMap((value) => Effect.mapError(Schema.decodeUnknown(schema)(value), (e) => fail("unavailable", `daytona ${what} sent an unexpected body: ${e.message}`)))
    )
  const recording = (sandbox: ProviderSandbox, response: HttpClientResponse.HttpClientResponse, what: string) =>
    Effect.map(boundedJson(response, 64 * 1024, WireRecording, what), (r): ProviderRecording => ({
      recordingId: r.id,
      state: recordingState(r.status),
      durationSeconds: typeof r.durationSeconds === "number" && Number.isFinite(r.durationSeconds) && r.durationSeconds >= 0 ? r.durationSeconds : null
    }))
  const recordingPath = (id: string) => `/computeruse/recordings/${encodeURIComponent(id)}`

  const action: ComputerDriver["action"] = (sandbox, a) => {
    switch (a.type) {
      case "mouse_move":
        return Effect.flatMap(post(sandbox, "/computeruse/mouse/move", "mouse move", { x: a.x, y: a.y }), (r) => position(r, "mouse move"))
      case "mouse_click":
        return Effect.flatMap(post(sandbox, "/computeruse/mouse/click", "mouse click", { x: a.x, y: a.y, button: a.button, double: a.double }), (r) => position(r, "mouse click"))
      case "mouse_drag":
        return Effect.flatMap(
          post(sandbox, "/computeruse/mouse/drag", "mouse drag", { startX: a.start_x, startY: a.start_y, endX: a.end_x, endY: a.end_y, button: a.button }),
          (r) => position(r, "mouse drag")
        )
      case "mouse_scroll":
        return Effect.gen(function*() {
          // The daemon scrolls at a position: where the pointer is, unless the action says where.
          const at = a.x !== undefined && a.y !== undefined
            ? { x: a.x, y: a.y }
            : (yield* position(yield* toolbox(sandbox, "GET", "/computeruse/mouse/position", "mouse position"), "mouse position")).cursor
          yield* post(sandbox, "/computeruse/mouse/scroll", "mouse scroll", { x: at.x, y: at.y, direction: a.direction, amount: a.amount })
          return { cursor: at }
        })
      case "keyboard_type":
        return Effect.gen(function*() {
          const perPiece = Math.max(1, Math.floor(TYPING_PIECE_MS / (a.delay_ms + 5)))
          const chars = [...a.text]
          for (let i = 0; i < chars.length; i += perPiece) {
            yield* post(sandbox, "/computeruse/keyboard/type", "keyboard type", { text: chars.slice(i, i + perPiece).join(""), delay: a.delay_ms })
          }
          return { cursor: null }
        })
      case "keyboard_key":
        return Effect.as(post(sandbox, "/computeruse/keyboard/key", "keyboard key", { key: a.key, modifiers: a.modifiers }), { cursor: null })
      case "keyboard_hotkey":
        return Effect.as(post(sandbox, "/computeruse/keyboard/hotkey", "keyboard hotkey", { keys: a.keys }), { cursor: null })
    }
  }

  const screenshot: ComputerDriver["screenshot"] = (sandbox, input) =>
    Effect.gen(function*() {
      const compressed = input.format !== "png" || input.scale !== 1
      const path = `/computeruse/screenshot${input.region === undefined ? "" : "/region"}${compressed ? "/compressed" : ""}`
      const params: Record<string, string> = {
        showCursor: String(input.showCursor),
        ...(compressed ? { format: input.format, quality: String(input.quality), scale: String(input.scale) } : {}),
        ...(input.region === undefined ? {} : Object.fromEntries(Object.entries(input.region).map(([k, v]) => [k, String(v)])))
      }
      const response = yield* toolbox(sandbox, "GET", path, "screenshot", (r) => HttpClientRequest.setUrlParams(r, params))
      const answer = yield* boundedJson(response, SCREENSHOT_ANSWER_BYTES, WireScreenshot, "screenshot")
      const data = new Uint8Array(Buffer.from(answer.screenshot, "base64"))
      if (data.length > SCREENSHOT_MAX_BYTES) return yield* fail("invalid_request", `daytona's screenshot is larger than ${SCREENSHOT_MAX_BYTES} bytes`)
      if (imageFormatOf(data) !== input.format) return yield* fail("unavailable", `daytona's screenshot is not the ${input.format} image asked for`)
      const cursor = answer.cursorPosition ?? null
      return { format: input.format, data, cursor: cursor === null ? null : { x: Math.round(cursor.x), y: Math.round(cursor.y) } }
    })

  return {
    start: (sandbox) => Effect.asVoid(toolbox(sandbox, "POST", "/computeruse/start", "start computer use")),
    action,
    screenshot,
    startRecording: (sandbox, input) =>
      Effect.flatMap(post(sandbox, "/computeruse/recordings/start", "start recording", input.label === undefined ? {} : { label: input.label }), (r) =>
        recording(sandbox, r, "start recording")),
    getRecording: (sandbox, id) => Effect.flatMap(toolbox(sandbox, "GET", recordingPath(id), "get recording"), (r) => recording(sandbox, r, "get recording")),
    stopRecording: (sandbox, id) => Effect.flatMap(post(sandbox, "/computeruse/recordings/stop", "stop recording", { id }), (r) => recording(sandbox, r, "stop recording")),
    downloadRecording: (sandbox, id, maxBytes) =>
      Effect.gen(function*() {
        const response = yield* toolbox(sandbox, "GET", `${recordingPath(id)}/download`, "download recording")
        const bytes = yield* readBodyAtMost(response, maxBytes, {
          unreadable: (message) => fail("unavailable", `daytona recording download could not be read: ${message}`),
          tooLarge: () => fail("invalid_request", `the recording is larger than the ${maxBytes} bytes the gateway keeps`)
        })
        if (!isMp4(bytes)) return yield* fail("unavailable", "daytona's recording is not an mp4")
        return bytes
      })
  }
}
