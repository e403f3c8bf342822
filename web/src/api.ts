/**
 * The dashboard's only way to the gateway: the public `/v1` API on this origin, signed in by the session cookie
 * (HttpOnly: this code never sees it). Every request carries the CSRF header the API asks of cookie-signed
 * changes; every failure is the API's envelope, thrown as an ApiError with its code, message and request id.
 */

export const CSRF_HEADER = "x-metal-csrf"

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId: string | undefined,
    readonly details: Record<string, unknown> | undefined
  ) {
    super(message)
  }
}

/** Called when the API answers 401 (the session ended): the app shows the sign-in page. */
let onSignedOut: () => void = () => {}
export const whenSignedOut = (callback: () => void) => {
  onSignedOut = callback
}

/** A failed answer as the API's envelope (its code, message, request id and details), or a plain description. */
export const envelopeOf = (status: number, text: string, requestId: string | null): ApiError => {
  try {
    const body = JSON.parse(text) as { code?: unknown; message?: unknown; request_id?: unknown; details?: unknown }
    if (typeof body.code === "string" && typeof body.message === "string") {
      const details = typeof body.details === "object" && body.details !== null ? (body.details as Record<string, unknown>) : undefined
      return new ApiError(status, body.code, body.message, typeof body.request_id === "string" ? body.request_id : requestId ?? undefined, details)
    }
  } catch {
    // not an envelope: described below
  }
  return new ApiError(status, status === 0 ? "network_error" : `http_${status}`, status === 0 ? "The gateway could not be reached" : `The gateway answered ${status}`, requestId ?? undefined, undefined)
}

export interface CallOptions {
  readonly idempotencyKey?: string
  /** Do not treat a 401 as the end of the session (the sign-in form's own request). */
  readonly quiet401?: boolean
}

export const call = async <T>(method: string, path: string, body?: unknown, options: CallOptions = {}): Promise<T> => {
  const headers: Record<string, string> = { [CSRF_HEADER]: "1", accept: "application/json" }
  if (body !== undefined) headers["content-type"] = "application/json"
  if (options.idempotencyKey !== undefined) headers["idempotency-key"] = options.idempotencyKey
  let response: Response
  try {
    response = await fetch(path, { method, headers, credentials: "same-origin", ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  } catch {
    throw envelopeOf(0, "", null)
  }
  const text = await response.text()
  if (!response.ok) {
    const error = envelopeOf(response.status, text, response.headers.get("x-request-id"))
    if (response.status === 401 && options.quiet401 !== true) onSignedOut()
    throw error
  }
  return (text === "" ? undefined : JSON.parse(text)) as T
}

export const get = <T>(path: string) => call<T>("GET", path)
export const post = <T>(path: string, body?: unknown, options?: CallOptions) => call<T>("POST", path, body, options)
export const put = <T>(path: string, body: unknown) => call<T>("PUT", path, body)
export const patch = <T>(path: string, body: unknown) => call<T>("PATCH", path, body)
export const del = <T>(path: string, body?: unknown) => call<T>("DELETE", path, body)

/** A fresh Idempotency-Key: one per thing the person asked for (a retry of the same request reuses it). */
export const newKey = () => crypto.randomUUID()

/** Uploads a file's bytes as a raw write, reporting the bytes sent as they go. */
export const upload = <T>(path: string, file: Blob, onProgress: (sent: number, total: number) => void): Promise<T> =>
  new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open("PUT", path)
    xhr.setRequestHeader(CSRF_HEADER, "1")
    xhr.setRequestHeader("content-type", "application/octet-stream")
    xhr.upload.onprogress = (event) => onProgress(event.loaded, event.lengthComputable ? event.total : file.size)
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) resolve(JSON.parse(xhr.responseText) as T)
      else {
        if (xhr.status === 401) onSignedOut()
        reject(envelopeOf(xhr.status, xhr.responseText, xhr.getResponseHeader("x-request-id")))
      }
    }
    xhr.onerror = () => reject(envelopeOf(0, "", null))
    xhr.send(file)
  })

/**
 * Follows a server-sent event stream (held open by the server; the browser reconnects with Last-Event-ID).
 * Returns the function that stops following.
 */
export const follow = (path: string, onEvent: (type: string, data: unknown, id: string) => void, types: ReadonlyArray<string>, onError?: () => void) => {
  const source = new EventSource(path, { withCredentials: true })
  const handle = (event: MessageEvent<string>) => {
    let data: unknown = event.data
    try {
      data = JSON.parse(event.data)
    } catch {
      // a plain-text frame stays text
    }
    onEvent(event.type, data, event.lastEventId)
  }
  for (const type of types) source.addEventListener(type, handle as EventListener)
  source.onmessage = handle
  if (onError !== undefined) source.onerror = onError
  return () => source.close()
}

/** Polls a record until it leaves its pending states (file operations answer 202 with a record to poll). */
export const settle = async <T extends { readonly state: string }>(path: string, first: T, pending: ReadonlyArray<string> = ["queued", "running"]): Promise<T> => {
  let record = first
  for (let wait = 50; pending.includes(record.state); wait = Math.min(wait * 2, 1000)) {
    await new Promise((r) => setTimeout(r, wait))
    record = await get<T>(path)
  }
  return record
}
