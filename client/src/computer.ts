/**
 * A sandbox's desktop (computer use) in the Promise layer: actions that resolve once performed, screenshots as
 * bytes, recordings that resolve once stopped and download as bytes, and the live view's address. The sandbox
 * must have been created with `features: { computer_use: true }`.
 */
import { ParseResult, Schema } from "effect"
import { ComputerAction, type Recording, TakeScreenshot } from "../../src/domain/Computer.ts"
import { GatewayError } from "./errors.ts"

export type ComputerActionInput = Schema.Schema.Encoded<typeof ComputerAction>
export type ScreenshotOptions = Schema.Schema.Encoded<typeof TakeScreenshot>
export type RecordingRecord = Schema.Schema.Type<typeof Recording>

export interface Screenshot {
  readonly format: "png" | "jpeg"
  readonly data: Uint8Array
  readonly cursor: { readonly x: number; readonly y: number } | null
}

/** The desktop's live view (noVNC) listens on this sandbox port; an endpoint to it is the live view. */
export const LIVE_VIEW_PORT = 6080

const decode = <A, I>(schema: Schema.Schema<A, I>, value: unknown): A => {
  const decoded = Schema.decodeUnknownEither(schema)(value)
  if (decoded._tag === "Left") throw new GatewayError("validation_error", ParseResult.TreeFormatter.formatErrorSync(decoded.left), 422, false)
  return decoded.right
}

export const decodeAction = (action: ComputerActionInput) => decode(ComputerAction, action)
export const decodeScreenshot = (options: ScreenshotOptions) => decode(TakeScreenshot, options)

/** What the desktop's handle is made of: the calls the client already has for this sandbox. */
export interface ComputerCalls {
  /** Accepts the action (a fresh Idempotency-Key, reused on retries) and waits for its runtime operation. */
  readonly act: (action: typeof ComputerAction.Type) => Promise<unknown>
  readonly screenshot: (options: typeof TakeScreenshot.Type) => Promise<unknown>
  readonly startRecording: (label: string | undefined) => Promise<RecordingRecord>
  readonly getRecording: (id: string) => Promise<RecordingRecord>
  readonly stopRecording: (id: string) => Promise<RecordingRecord>
  readonly listRecordings: () => Promise<ReadonlyArray<RecordingRecord>>
  readonly recordingContent: (id: string) => Promise<Uint8Array>
  readonly expose: (port: number, o: { readonly leaseSeconds?: number }) => Promise<{ readonly url: string }>
  readonly sleep: (ms: number) => Promise<void>
}

export const makeComputer = (calls: ComputerCalls) => {
  const cursorOf = (result: unknown) => ((result as { cursor_position?: { x: number; y: number } | null } | null)?.cursor_position ?? null)
  const act = async (action: ComputerActionInput) => ({ cursor: cursorOf(await calls.act(decodeAction(action))) })
  const untilOver = async (id: string, stopped: RecordingRecord) => {
    let r = stopped
    while (r.state === "stopping" || r.state === "recording") {
      await calls.sleep(200)
      r = await calls.getRecording(id)
    }
    if (r.state !== "stopped") throw new GatewayError(r.error?.code ?? "recording_failed", r.error?.message ?? `The recording is ${r.state}`, 0, false, r.error?.details)
    return r
  }
  return {
    /** Any action, by `type` (mouse_move, mouse_click, mouse_drag, mouse_scroll, keyboard_type, keyboard_key, keyboard_hotkey). */
    act,
    move: (x: number, y: number) => act({ type: "mouse_move", x, y }),
    click: (x: number, y: number, o: { readonly button?: "left" | "right" | "middle"; readonly double?: boolean } = {}) => act({ type: "mouse_click", x, y, ...o }),
    drag: (from: { readonly x: number; readonly y: number }, to: { readonly x: number; readonly y: number }, button?: "left" | "right" | "middle") =>
      act({ type: "mouse_drag", start_x: from.x, start_y: from.y, end_x: to.x, end_y: to.y, ...(button === undefined ? {} : { button }) }),
    scroll: (direction: "up" | "down", amount = 1, at?: { readonly x: number; readonly y: number }) => act({ type: "mouse_scroll", direction, amount, ...at }),
    type: (text: string, o: { readonly delayMs?: number } = {}) => act({ type: "keyboard_type", text, ...(o.delayMs === undefined ? {} : { delay_ms: o.delayMs }) }),
    key: (key: string, modifiers: ReadonlyArray<"ctrl" | "alt" | "shift" | "cmd"> = []) => act({ type: "keyboard_key", key, modifiers }),
    hotkey: (keys: string) => act({ type: "keyboard_hotkey", keys }),
    /** A screenshot's bytes (png unless `format: "jpeg"`). */
    screenshot: async (options: ScreenshotOptions = {}): Promise<Screenshot> => {
      const result = (await calls.screenshot(decodeScreenshot(options))) as { format: "png" | "jpeg"; data_base64: string; cursor_position: { x: number; y: number } | null }
      return { format: result.format, data: new Uint8Array(Buffer.from(result.data_base64, "base64")), cursor: result.cursor_position }
    },
    recordings: {
      /** Starts recording the desktop; resolves once it records. */
      start: async (o: { readonly label?: string } = {}) => {
        let r = await calls.startRecording(o.label)
        while (r.state === "starting") {
          await calls.sleep(100)
          r = await calls.getRecording(r.id)
        }
        if (r.state !== "recording") throw new GatewayError(r.error?.code ?? "recording_failed", r.error?.message ?? `The recording is ${r.state}`, 0, false, r.error?.details)
        return r
      },
      get: calls.getRecording,
      list: calls.listRecordings,
      /** Stops the recording; resolves once its mp4 is kept (`byte_length`, `duration_seconds`). */
      stop: async (id: string) => untilOver(id, await calls.stopRecording(id)),
      /** A stopped recording's mp4. */
      download: calls.recordingContent
    },
    /**
     * The live view: an endpoint to the desktop's noVNC, and the page to open in a browser (it connects its
     * WebSocket through the same endpoint).
     */
    liveView: async (o: { readonly leaseSeconds?: number } = {}) => {
      const endpoint = await calls.expose(LIVE_VIEW_PORT, o)
      const base = new URL(endpoint.url)
      const path = `${base.pathname.replace(/^\/+/, "")}websockify`
      return { endpoint, url: `${endpoint.url}vnc.html?autoconnect=1&resize=scale&path=${encodeURIComponent(path)}` }
    }
  }
}
