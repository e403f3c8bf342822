/**
 * Shapes of the agent's desktop answers (agent/desktop.ts), checked before use like every agent answer
 * (AgentWire.ts): the agent is hostile. A screenshot is attacker bytes: its size is capped while it is read
 * (SCREENSHOT_MAX_BYTES), and it must be what it says — a PNG or a JPEG by its signature — of the size it states.
 */
import type { AgentAnswer } from "./AgentChannel.ts"
import { answerError, invalidAnswer } from "./AgentWire.ts"
import type { DesktopInfo, DesktopRecording, Screenshot } from "./LocalRuntime.ts"

/** The largest screen a desktop has (agent/desktop.ts MAX_WIDTH × MAX_HEIGHT). */
export const MAX_SCREEN = { width: 3840, height: 2160 } as const
/**
 * The largest screenshot the gateway takes from a sandbox: an incompressible PNG of the largest screen is
 * 3840×2160×3 bytes plus its rows' filter bytes and the encoder's overhead, ~24.9 MB; a JPEG is smaller.
 */
export const SCREENSHOT_MAX_BYTES = 26 * 1024 * 1024
/** The display the agent's desktop serves, in the jail's own /tmp/.X11-unix (agent/desktop.ts DISPLAY). */
export const DISPLAY = ":1"
/** Where the agent keeps recordings inside the jail (agent/desktop.ts RECORDINGS_DIR). */
export const RECORDINGS_DIR = "/run/agent/recordings"
/** Recording ids the agent makes: 32 lowercase hex digits. */
export const RECORDING_ID = /^[a-f0-9]{32}$/

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)
const isInt = (v: unknown, min: number, max: number): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= min && v <= max
const isIsoDate = (v: unknown): v is string => typeof v === "string" && v.length <= 40 && !Number.isNaN(Date.parse(v))

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
const startsWith = (body: Uint8Array, signature: ReadonlyArray<number>) => signature.every((b, i) => body[i] === b)

export const desktopInfo = (v: unknown): DesktopInfo | null => {
  if (!isObject(v) || typeof v["running"] !== "boolean") throw invalidAnswer()
  if (!v["running"]) return null
  const { width, height, liveViewPort } = v
  if (!isInt(width, 1, MAX_SCREEN.width) || !isInt(height, 1, MAX_SCREEN.height) || !(liveViewPort === null || isInt(liveViewPort, 1, 65535))) throw invalidAnswer()
  return { width, height, liveViewPort: liveViewPort as number | null }
}

export const actionResult = (v: unknown) => {
  if (!isObject(v) || !isObject(v["cursor"])) throw invalidAnswer()
  const { x, y } = v["cursor"]
  if (!isInt(x, -32768, 32767) || !isInt(y, -32768, 32767)) throw invalidAnswer()
  return { cursor: { x, y } }
}

/**
 * A screenshot answer: the bytes (already capped by the read), which must carry the signature of the format asked
 * for and the dimensions it states, at most the region asked for.
 */
export const screenshotResult = (answer: AgentAnswer, format: "png" | "jpeg", bounds: { readonly width: number; readonly height: number }): Screenshot => {
  if (answer.status < 200 || answer.status > 299) throw answerError(answer)
  const data = new Uint8Array(answer.body.buffer, answer.body.byteOffset, answer.body.length)
  const width = Number(answer.headers.get("x-width") ?? NaN)
  const height = Number(answer.headers.get("x-height") ?? NaN)
  const x = Number(answer.headers.get("x-cursor-x") ?? NaN)
  const y = Number(answer.headers.get("x-cursor-y") ?? NaN)
  if (!isInt(width, 1, bounds.width) || !isInt(height, 1, bounds.height) || !isInt(x, -32768, 32767) || !isInt(y, -32768, 32767)) throw invalidAnswer()
  if (format === "png") {
    // The IHDR chunk follows the signature: its width and height are what the image really is.
    if (data.length < 33 || !startsWith(data, PNG) || Buffer.from(data.subarray(12, 16)).toString("latin1") !== "IHDR") throw invalidAnswer()
    const view = new DataView(data.buffer, data.byteOffset, data.length)
    if (view.getUint32(16) !== width || view.getUint32(20) !== height) throw invalidAnswer()
  } else if (data.length < 4 || !startsWith(data, [0xff, 0xd8, 0xff])) throw invalidAnswer()
  return { format, data, width, height, cursor: { x, y } }
}

const STATES = new Set<DesktopRecording["state"]>(["starting", "recording", "stopping", "stopped", "failed"])

export const recordingResult = (v: unknown): DesktopRecording => {
  if (!isObject(v)) throw invalidAnswer()
  const { id, state, startedAt, stoppedAt, sizeBytes, durationSeconds } = v
  if (
    typeof id !== "string" || !RECORDING_ID.test(id) || typeof state !== "string" || !STATES.has(state as DesktopRecording["state"]) || !isIsoDate(startedAt) ||
    !(stoppedAt === null || isIsoDate(stoppedAt)) || !(sizeBytes === null || isInt(sizeBytes, 0, Number.MAX_SAFE_INTEGER)) ||
    typeof durationSeconds !== "number" || !Number.isFinite(durationSeconds) || durationSeconds < 0 || durationSeconds > 10 * 365 * 86400
  ) throw invalidAnswer()
  return {
    id,
    state: state as DesktopRecording["state"],
    startedAt,
    stoppedAt: stoppedAt as string | null,
    sizeBytes: sizeBytes as number | null,
    durationSeconds,
    path: `${RECORDINGS_DIR}/${id}.mp4`
  }
}

export const recordingList = (v: unknown): Array<DesktopRecording> => {
  if (!isObject(v) || !Array.isArray(v["recordings"]) || v["recordings"].length > 10_000) throw invalidAnswer()
  return (v["recordings"] as Array<unknown>).map(recordingResult)
}
