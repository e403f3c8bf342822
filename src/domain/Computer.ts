/**
 * Computer use (reference §2 "Runtime", spec §2.8 `computer`): the actions and screenshots a sandbox's desktop
 * takes — runtime operations of kinds `computer_action` and `computer_screenshot` — and its recordings, a resource
 * of their own (starting → recording → stopping → stopped | failed).
 */
import { Schema } from "effect"
import { strict, Timestamp } from "./Accounts.ts"
import { ErrorObject } from "./Errors.ts"
import { ProjectId, RecordingId, SandboxId } from "./Ids.ts"
import { withDefault } from "./Sandbox.ts"

/** Screen coordinates: X's are 16-bit; the sandbox's screen is smaller still (an action past it fails). */
const Coordinate = Schema.Int.pipe(Schema.between(0, 32_767))
const Button = Schema.Literal("left", "right", "middle")

export const MAX_TYPED_TEXT = 100_000
/** Typing is as slow as its delay: at most this long in all (text length × delay_ms). */
export const MAX_TYPING_MS = 10 * 60_000

/** A key name as X knows it (Return, Tab, F5, a, space) or one printable character. */
const KeyName = Schema.String.pipe(
  Schema.pattern(/^(?:[A-Za-z0-9_]{1,64}|[!-~])$/, { message: () => "must be a key name (Return, F5, a, space) or one printable character" })
)
/** Keys joined by + (ctrl+c), several combinations separated by spaces (ctrl+a ctrl+c). */
const Hotkeys = Schema.String.pipe(
  Schema.maxLength(1000),
  Schema.pattern(/^[A-Za-z0-9_]{1,64}(?:\+[A-Za-z0-9_]{1,64}){0,7}(?: [A-Za-z0-9_]{1,64}(?:\+[A-Za-z0-9_]{1,64}){0,7}){0,15}$/, {
    message: () => "must be key names joined by + (ctrl+c), several combinations separated by single spaces"
  })
)
export const Modifier = Schema.Literal("ctrl", "alt", "shift", "cmd")

const action = <T extends string, F extends Schema.Struct.Fields>(type: T, fields: F) =>
  Schema.Struct({ type: Schema.Literal(type), ...fields }).annotations({ identifier: `ComputerAction_${type}`, ...strict })

export const ComputerAction = Schema.Union(
  action("mouse_move", { x: Coordinate, y: Coordinate }),
  action("mouse_click", { x: Coordinate, y: Coordinate, button: withDefault(Button, "left"), double: withDefault(Schema.Boolean, false) }),
  action("mouse_drag", { start_x: Coordinate, start_y: Coordinate, end_x: Coordinate, end_y: Coordinate, button: withDefault(Button, "left") }),
  action("mouse_scroll", {
    direction: Schema.Literal("up", "down"),
    amount: withDefault(Schema.Int.pipe(Schema.between(1, 100)), 1),
    x: Schema.optional(Coordinate),
    y: Schema.optional(Coordinate)
  }).pipe(Schema.filter((a) => (a.x === undefined) === (a.y === undefined) || "x and y come together (or neither: scroll where the pointer is)")),
  action("keyboard_type", {
    text: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_TYPED_TEXT)),
    delay_ms: withDefault(Schema.Int.pipe(Schema.between(0, 60_000)), 12)
  }).pipe(Schema.filter((a) => a.text.length * a.delay_ms <= MAX_TYPING_MS || `typing ${a.text.length} characters ${a.delay_ms} ms apart would take longer than 10 minutes`)),
  action("keyboard_key", { key: KeyName, modifiers: withDefault(Schema.Array(Modifier).pipe(Schema.maxItems(4)), []) }),
  action("keyboard_hotkey", { keys: Hotkeys })
).annotations({ identifier: "ComputerAction" })
export type ComputerAction = typeof ComputerAction.Type

export const ScreenRegion = Schema.Struct({
  x: Coordinate,
  y: Coordinate,
  width: Schema.Int.pipe(Schema.between(1, 32_767)),
  height: Schema.Int.pipe(Schema.between(1, 32_767))
}).annotations({ identifier: "ScreenRegion", ...strict })

export const TakeScreenshot = Schema.Struct({
  format: withDefault(Schema.Literal("png", "jpeg"), "png"),
  show_cursor: withDefault(Schema.Boolean, false),
  /** JPEG only. */
  quality: withDefault(Schema.Int.pipe(Schema.between(1, 100)), 85),
  scale: withDefault(Schema.Number.pipe(Schema.between(0.1, 1)), 1),
  region: Schema.optional(ScreenRegion)
}).annotations({ identifier: "TakeScreenshot", ...strict })
export type TakeScreenshot = typeof TakeScreenshot.Type

const CursorPosition = Schema.Struct({ x: Schema.Int, y: Schema.Int })

export const ComputerActionResult = Schema.Struct({
  kind: Schema.Literal("computer_action"),
  action: Schema.String,
  /** Where the pointer is after the action, where the provider says. */
  cursor_position: Schema.NullOr(CursorPosition)
})

export const ComputerScreenshotResult = Schema.Struct({
  kind: Schema.Literal("computer_screenshot"),
  format: Schema.Literal("png", "jpeg"),
  data_base64: Schema.String,
  byte_length: Schema.NonNegativeInt,
  cursor_position: Schema.NullOr(CursorPosition)
})

// Recordings --------------------------------------------------------------------------------------------------

export const RecordingState = Schema.Literal("starting", "recording", "stopping", "stopped", "failed").annotations({ identifier: "RecordingState" })

export const CreateRecording = Schema.Struct({
  format: withDefault(Schema.Literal("mp4"), "mp4"),
  label: Schema.optional(Schema.String.pipe(Schema.maxLength(200)))
}).annotations({ identifier: "CreateRecording", ...strict })

export const Recording = Schema.Struct({
  id: RecordingId,
  type: Schema.Literal("recording"),
  project_id: ProjectId,
  sandbox_id: SandboxId,
  state: RecordingState,
  format: Schema.Literal("mp4"),
  label: Schema.NullOr(Schema.String),
  /** Once stopped: the mp4's size, its length in seconds, and where to download it (`…/content`, Range supported). */
  byte_length: Schema.NullOr(Schema.NonNegativeInt),
  duration_seconds: Schema.NullOr(Schema.Number),
  content_url: Schema.NullOr(Schema.String),
  error: Schema.NullOr(ErrorObject),
  created_at: Timestamp,
  started_at: Schema.NullOr(Timestamp),
  stopped_at: Schema.NullOr(Timestamp),
  updated_at: Timestamp
}).annotations({ identifier: "Recording" })

export const RecordingList = Schema.Struct({ recordings: Schema.Array(Recording), next_cursor: Schema.NullOr(Schema.String) }).annotations({ identifier: "RecordingList" })

// What a sandbox sends back ------------------------------------------------------------------------------------

/** The largest screenshot the gateway passes on (an incompressible PNG of a 3840×2160 screen fits). */
export const SCREENSHOT_MAX_BYTES = 26 * 1024 * 1024

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]

/** The format the bytes are by their signature (a PNG's, a JPEG's start of image), else undefined. */
export const imageFormatOf = (bytes: Uint8Array): "png" | "jpeg" | undefined => {
  if (bytes.length >= 8 && PNG_SIGNATURE.every((b, i) => bytes[i] === b)) return "png"
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return "jpeg"
  return undefined
}

/** An ISO base media file (mp4) starts with its `ftyp` box. */
export const isMp4 = (bytes: Uint8Array): boolean =>
  bytes.length >= 12 && bytes[4] === 0x66 && bytes[5] === 0x74 && bytes[6] === 0x79 && bytes[7] === 0x70
