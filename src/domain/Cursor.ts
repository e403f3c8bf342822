/**
 * Opaque cursors (the decoding side, with its 422s, is `http/Pagination.ts`): base64url of
 * `{"v":1,"s":<scope>,"k":<position>}`. The scope binds a cursor to one list; the position is the sort key of the
 * item it points at. Minted here so that services (webhook bodies) and handlers (lists, the event stream) agree.
 */

export const CURSOR_VERSION = 1

/** A sort-key component: strings (timestamps, ids) and safe integers survive JSON unchanged. */
export type PositionPart = string | number
export type Position = ReadonlyArray<PositionPart>

export const encodeCursor = (scope: string, position: Position): string =>
  Buffer.from(JSON.stringify({ v: CURSOR_VERSION, s: scope, k: position })).toString("base64url")

/** The list an event's cursor belongs to: its project's event log (`/v1/events`), or its organization's. */
export const eventCursorScope = (event: { readonly project_id: string | null; readonly organization_id: string }) =>
  event.project_id !== null ? `events:${event.project_id}` : `events:org:${event.organization_id}`

/** An event's cursor: the same value in `/v1/events`, webhook bodies and the event stream's `id:` lines. */
export const eventCursor = (event: { readonly seq: number; readonly project_id: string | null; readonly organization_id: string }) =>
  encodeCursor(eventCursorScope(event), [event.seq])
