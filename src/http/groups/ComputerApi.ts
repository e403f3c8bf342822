/**
 * Computer use (reference §2 "Runtime"): a sandbox created with `features.computer_use` has a desktop. Actions and
 * screenshots answer 202 with a runtime operation to poll (its `Location`), run in the sandbox's order; a
 * screenshot's result carries the image as `data_base64`. Recordings are a resource of their own: starting →
 * recording → stopping → stopped | failed, their mp4 kept by the gateway once stopped (`…/content`).
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { BadRequest, Conflict, failsWith, NotFound, RangeNotSatisfiable, TooManyRequests } from "../../domain/Errors.ts"
import { ComputerAction, CreateRecording, Recording, RecordingList, TakeScreenshot } from "../../domain/Computer.ts"
import { RuntimeOperation } from "../../domain/Runtime.ts"
import { PageParams } from "../Pagination.ts"
import { ProjectKeyAuth } from "../Security.ts"
import { IdempotencyHeaders } from "./Common.ts"
import { recordingIdParam, sandboxIdParam } from "./SandboxPlane.ts"

const needsDesktop =
  "409 `invalid_sandbox_state` unless the sandbox is ready; 409 `capability_unsupported` when it was not created with `features.computer_use` or its provider has no desktop."

export class ComputerApi extends HttpApiGroup.make("computer")
  .add(
    HttpApiEndpoint.post("action")`/v1/sandboxes/${sandboxIdParam}/computer/actions`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(TooManyRequests, "too_many_requests"))
      .setPayload(ComputerAction)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(RuntimeOperation, { status: 202 })
      .annotate(
        OpenApi.Description,
        `One input action, by \`type\`: mouse_move {x, y}, mouse_click {x, y, button, double}, mouse_drag {start_x, start_y, end_x, end_y, button}, mouse_scroll {direction, amount, x?, y?}, keyboard_type {text (≤ 100,000 characters), delay_ms}, keyboard_key {key, modifiers (≤ 4 of ctrl, alt, shift, cmd)}, keyboard_hotkey {keys, e.g. \`ctrl+c\`}. \`Idempotency-Key\` required. The runtime operation's result says where the pointer is afterwards. At most 32 actions and screenshots wait per sandbox (429 \`too_many_requests\`). ${needsDesktop}`
      )
  )
  .add(
    HttpApiEndpoint.post("screenshot")`/v1/sandboxes/${sandboxIdParam}/computer/screenshots`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(TooManyRequests, "too_many_requests"))
      .setPayload(TakeScreenshot)
      .addSuccess(RuntimeOperation, { status: 202 })
      .annotate(
        OpenApi.Description,
        `A screenshot (png by default, or jpeg with \`quality\`), of the whole screen or a \`region\`, scaled by \`scale\` (0.1–1), with the pointer drawn if \`show_cursor\`. The runtime operation's result is {format, data_base64, byte_length, cursor_position}. ${needsDesktop}`
      )
  )
  .add(
    HttpApiEndpoint.get("listRecordings")`/v1/sandboxes/${sandboxIdParam}/recordings`
      .addError(failsWith(NotFound, "not_found"))
      .setUrlParams(PageParams)
      .addSuccess(RecordingList)
  )
  .add(
    HttpApiEndpoint.post("startRecording")`/v1/sandboxes/${sandboxIdParam}/recordings`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "capability_unsupported", "idempotency_in_progress", "idempotency_mismatch", "invalid_sandbox_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setPayload(CreateRecording)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(Recording, { status: 202 })
      .annotate(
        OpenApi.Description,
        `Starts recording the desktop to an mp4 (\`Idempotency-Key\` required). While a recording is open the sandbox cannot be paused (409 \`recording_active\`); when the sandbox stops, an open recording fails with \`sandbox_stopped\`. ${needsDesktop}`
      )
  )
  .add(
    HttpApiEndpoint.get("getRecording")`/v1/sandboxes/${sandboxIdParam}/recordings/${recordingIdParam}`
      .addError(failsWith(NotFound, "not_found"))
      .addSuccess(Recording)
  )
  .add(
    HttpApiEndpoint.post("stopRecording")`/v1/sandboxes/${sandboxIdParam}/recordings/${recordingIdParam}/actions/stop`
      .addError(failsWith(BadRequest, "idempotency_key_required"))
      .addError(failsWith(Conflict, "idempotency_in_progress", "idempotency_mismatch", "invalid_recording_state"))
      .addError(failsWith(NotFound, "not_found"))
      .setHeaders(IdempotencyHeaders)
      .addSuccess(Recording, { status: 202 })
      .annotate(
        OpenApi.Description,
        "Stops the recording (→ stopping → stopped once its mp4 is kept). 409 `invalid_recording_state` while it is still starting; a recording already stopping or over is answered as it is."
      )
  )
  .add(
    HttpApiEndpoint.get("recordingContent")`/v1/sandboxes/${sandboxIdParam}/recordings/${recordingIdParam}/content`
      .addError(failsWith(Conflict, "invalid_recording_state"))
      .addError(failsWith(NotFound, "not_found"))
      .addError(failsWith(RangeNotSatisfiable, "range_not_satisfiable"))
      .setHeaders(Schema.Struct({ range: Schema.optional(Schema.String.pipe(Schema.maxLength(200))) }))
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "video/mp4" }))
      .annotate(
        OpenApi.Description,
        "A stopped recording's mp4 (`Content-Length`, `Accept-Ranges: bytes`); one `Range: bytes=a-b` (or `a-`, `-n`) answers 206 with `Content-Range`, a malformed or unsatisfiable one 416. 409 `invalid_recording_state` until the recording is stopped. It stays downloadable after the sandbox is gone."
      )
  )
  .middleware(ProjectKeyAuth)
  .annotate(OpenApi.Title, "Computer use")
{}
