/**
 * What the daemon's PTY socket says besides the terminal's bytes (terminals.ts drives the socket): its text control
 * frames (`{"type":"control","status":"connected"|"error", "error"?}`) and the close reason that carries the
 * session's exit (`{"exitCode": n}`). Both are decoded through a schema: they come from the sandbox's daemon.
 */
import { Option, Schema } from "effect"

/** Text frames longer than this are not control messages (the daemon's are a few dozen bytes). */
export const MAX_CONTROL_BYTES = 4096

/** A PTY socket's close reason: `{"exitCode": n, …}`. */
const decodeCloseReason = Schema.decodeUnknownOption(Schema.parseJson(Schema.Struct({ exitCode: Schema.Number.pipe(Schema.int()) })))

/** `{"exitCode": n, …}` from a close reason; the SDK reads a normal close without one as exit 0. */
export const exitOfClose = (code: number, reason: string): number | undefined =>
  Option.match(decodeCloseReason(reason), { onSome: (r) => r.exitCode, onNone: () => (code === 1000 ? 0 : undefined) })

/** A PTY socket's control message: `{"type": "control", "status": …, "error"?: …}`. */
const decodeControl = Schema.decodeUnknownOption(Schema.parseJson(Schema.Struct({ type: Schema.Literal("control"), status: Schema.String, error: Schema.optional(Schema.Unknown) })))

export const controlOf = (text: string): { readonly status: string; readonly error: string } | undefined =>
  Option.getOrUndefined(Option.map(decodeControl(text), (c) => ({ status: c.status, error: typeof c.error === "string" ? c.error : "the daemon refused the connection" })))
