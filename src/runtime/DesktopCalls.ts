/**
 * The desktop calls of the runtime (computer use), each one call to the jail's agent over the adopted socket
 * (AgentChannel.ts) with a time limit and a byte cap, its answer decoded by DesktopWire.ts before use. Arguments
 * are checked here first; the API has already checked them against its own schema.
 */
import { Option } from "effect"
import { agentCaller, type AgentCallsOptions } from "./AgentCalls.ts"
import * as Protocol from "./AgentProtocol.ts"
import * as Wire from "./AgentWire.ts"
import * as Desktop from "./DesktopWire.ts"
import { type DesktopAction, type LocalRuntimeShape, runtimeError as err } from "./LocalRuntime.ts"

/** Starting a display, a window manager and the live view may take a while on a busy host. */
const START_TIMEOUT_MS = 30_000
/** Stopping a recording waits for ffmpeg to write the mp4's index (the agent kills it after 20 s). */
const STOP_TIMEOUT_MS = 30_000
/** Typing is as slow as its delay asks: the agent's own time limit for it (agent/desktop.ts) plus a margin. */
const actionTimeoutMs = (action: DesktopAction, base: number) =>
  action.type === "keyboard_type" ? base + 10_000 + action.text.length * (action.delay_ms + 5) : base

type Calls = Pick<LocalRuntimeShape, "startDesktop" | "desktop" | "desktopAction" | "screenshot" | "startRecording" | "recording" | "listRecordings" | "stopRecording">

const recordingId = (id: string) => {
  if (typeof id !== "string" || !Desktop.RECORDING_ID.test(id)) throw err("not_found", "no such recording")
  return id
}

const dimension = (name: string, value: number, max: number) => {
  if (!Number.isSafeInteger(value) || value < 1 || value > max) throw err("invalid", `${name} must be an integer from 1 to ${max}`)
  return value
}

export const makeDesktopCalls = (options: AgentCallsOptions): Calls => {
  const { callTimeoutMs, requireRunning, run } = options
  const agent = agentCaller(options)

  return {
    startDesktop: (id, size) =>
      run(async (cut) => {
        const width = dimension("width", size.width, Desktop.MAX_SCREEN.width)
        const height = dimension("height", size.height, Desktop.MAX_SCREEN.height)
        const info = Desktop.desktopInfo(await agent(requireRunning(id), Protocol.withQuery("/desktop", Protocol.DesktopQuery, { width, height }), cut, { method: "POST", timeoutMs: START_TIMEOUT_MS }))
        if (info === null) throw Wire.invalidAnswer()
        return info
      }),
    desktop: (id) => run(async (cut) => Option.fromNullable(Desktop.desktopInfo(await agent(requireRunning(id), "/desktop", cut)))),
    desktopAction: (id, action) =>
      run(async (cut) =>
        Desktop.actionResult(
          await agent(requireRunning(id), "/desktop/action", cut, {
            method: "POST",
            body: JSON.stringify(action),
            contentType: "application/json",
            timeoutMs: actionTimeoutMs(action, callTimeoutMs)
          })
        )),
    screenshot: (id, spec) =>
      run(async (cut) => {
        const route = Protocol.withQuery("/desktop/screenshot", Protocol.ScreenshotQuery, { format: spec.format, cursor: spec.showCursor, quality: spec.quality, scale: spec.scale, ...spec.region })
        const bounds = spec.region === undefined
          ? Desktop.MAX_SCREEN
          : { width: dimension("width", spec.region.width, Desktop.MAX_SCREEN.width), height: dimension("height", spec.region.height, Desktop.MAX_SCREEN.height) }
        const answer = await agent(requireRunning(id), route, cut, { maxBytes: Desktop.SCREENSHOT_MAX_BYTES })
        return Desktop.screenshotResult(answer, spec.format, bounds)
      }),
    startRecording: (id) => run(async (cut) => Desktop.recordingResult(await agent(requireRunning(id), "/desktop/recordings", cut, { method: "POST" }))),
    recording: (id, recording) =>
      run(async (cut) => Desktop.recordingResult(await agent(requireRunning(id), `/desktop/recordings/${recordingId(recording)}`, cut))),
    listRecordings: (id) => run(async (cut) => Desktop.recordingList(await agent(requireRunning(id), "/desktop/recordings", cut))),
    stopRecording: (id, recording) =>
      run(async (cut) =>
        Desktop.recordingResult(await agent(requireRunning(id), `/desktop/recordings/${recordingId(recording)}/stop`, cut, { method: "POST", timeoutMs: STOP_TIMEOUT_MS })))
  }
}
