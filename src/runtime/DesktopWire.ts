/**
 * The agent's desktop answers (agent/desktop.ts) decoded before use by the Schemas of its protocol
 * (AgentProtocol.ts), like every agent answer (AgentWire.ts): the agent is hostile. A screenshot is attacker
 * bytes: its size is capped while it is read (SCREENSHOT_MAX_BYTES), and it must be what it says — a PNG or a
 * JPEG by its signature — of the size it states.
 */
import type { AgentAnswer } from "./AgentChannel.ts"
import * as Protocol from "./AgentProtocol.ts"
import { answerError, decoder, invalidAnswer, jsonDecoder } from "./AgentWire.ts"
import type { DesktopInfo, DesktopRecording, Screenshot } from "./LocalRuntime.ts"

export { MAX_SCREEN, RECORDING_ID } from "./AgentProtocol.ts"
/**
 * The largest screenshot the gateway takes from a sandbox: an incompressible PNG of the largest screen is
 * 3840×2160×3 bytes plus its rows' filter bytes and the encoder's overhead, ~24.9 MB; a JPEG is smaller.
 */
export const SCREENSHOT_MAX_BYTES = 26 * 1024 * 1024
/** The display the agent's desktop serves, in the jail's own /tmp/.X11-unix (agent/desktop.ts DISPLAY). */
export const DISPLAY = ":1"
/** Where the agent keeps recordings inside the jail (agent/desktop.ts RECORDINGS_DIR). */
export const RECORDINGS_DIR = "/run/agent/recordings"

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
const startsWith = (body: Uint8Array, signature: ReadonlyArray<number>) => signature.every((b, i) => body[i] === b)

const desktopAnswer = jsonDecoder(Protocol.DesktopAnswer)
export const desktopInfo = (answer: AgentAnswer): DesktopInfo | null => {
  const d = desktopAnswer(answer)
  return d.running ? { width: d.width, height: d.height, liveViewPort: d.liveViewPort } : null
}

const actionAnswer = jsonDecoder(Protocol.ActionAnswer)
export const actionResult = (answer: AgentAnswer) => ({ cursor: actionAnswer(answer).cursor })

const screenshotHead = decoder(Protocol.ScreenshotHead)

/**
 * A screenshot answer: the bytes (already capped by the read), which must carry the signature of the format asked
 * for and the dimensions it states, at most the region asked for.
 */
export const screenshotResult = (answer: AgentAnswer, format: "png" | "jpeg", bounds: { readonly width: number; readonly height: number }): Screenshot => {
  if (answer.status < 200 || answer.status > 299) throw answerError(answer)
  const data = new Uint8Array(answer.body.buffer, answer.body.byteOffset, answer.body.length)
  const h = (name: keyof Protocol.ScreenshotHead) => answer.headers.get(name)
  const head = screenshotHead({ "x-width": h("x-width"), "x-height": h("x-height"), "x-cursor-x": h("x-cursor-x"), "x-cursor-y": h("x-cursor-y") })
  const width = head["x-width"]
  const height = head["x-height"]
  if (width > bounds.width || height > bounds.height) throw invalidAnswer()
  if (format === "png") {
    // The IHDR chunk follows the signature: its width and height are what the image really is.
    if (data.length < 33 || !startsWith(data, PNG) || Buffer.from(data.subarray(12, 16)).toString("latin1") !== "IHDR") throw invalidAnswer()
    const view = new DataView(data.buffer, data.byteOffset, data.length)
    if (view.getUint32(16) !== width || view.getUint32(20) !== height) throw invalidAnswer()
  } else if (data.length < 4 || !startsWith(data, [0xff, 0xd8, 0xff])) throw invalidAnswer()
  return { format, data, width, height, cursor: { x: head["x-cursor-x"], y: head["x-cursor-y"] } }
}

/** A recording as the gateway shows it: its file where the agent keeps it (never a path the agent names). */
const recording = (r: typeof Protocol.RecordingAnswer.Type): DesktopRecording => ({ ...r, path: `${RECORDINGS_DIR}/${r.id}.mp4` })

const recordingAnswer = jsonDecoder(Protocol.RecordingAnswer)
export const recordingResult = (answer: AgentAnswer): DesktopRecording => recording(recordingAnswer(answer))

const recordingListAnswer = jsonDecoder(Protocol.RecordingListAnswer)
export const recordingList = (answer: AgentAnswer): Array<DesktopRecording> => recordingListAnswer(answer).recordings.map(recording)
