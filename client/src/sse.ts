/**
 * Follows a gateway event stream (`…/events?follow=true`): each frame's `data` is handed over as it arrives; the
 * promise resolves when the gateway ends the stream (after the terminal event). A dropped stream is resumed
 * from the last frame seen (Last-Event-ID), so no event is lost or repeated. A stream the gateway ends with an
 * `event: error` frame (its credential was revoked or expired) rejects with that envelope's GatewayError.
 */
import { fromEnvelope, fromResponse } from "./errors.ts"

const RESUME_ATTEMPTS = 5

export const followEvents = async (
  fetchImpl: typeof globalThis.fetch,
  url: string,
  headers: Record<string, string>,
  onEvent: (type: string, data: unknown) => void
): Promise<void> => {
  let lastId: string | undefined
  for (let attempt = 0; ; attempt++) {
    let ended = false
    try {
      const response = await fetchImpl(url, { headers: { ...headers, accept: "text/event-stream", ...(lastId !== undefined ? { "last-event-id": lastId } : {}) } })
      if (response.status !== 200) throw await fromResponse(response)
      const decoder = new TextDecoder()
      let buffer = ""
      for await (const chunk of response.body!) {
        buffer += decoder.decode(chunk, { stream: true })
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const frame = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          let id: string | undefined
          let event = "message"
          let data = ""
          for (const line of frame.split("\n")) {
            if (line.startsWith("id: ")) id = line.slice(4)
            else if (line.startsWith("event: ")) event = line.slice(7)
            else if (line.startsWith("data: ")) data += line.slice(6)
          }
          if (data === "") continue // a heartbeat comment
          if (id !== undefined) lastId = id
          const parsed = JSON.parse(data) as { data?: unknown }
          if (event === "error" && id === undefined) throw fromEnvelope(0, parsed)
          onEvent(event, parsed.data)
        }
      }
      ended = true
    } catch (e) {
      if ((e as { name?: string }).name === "GatewayError" || attempt >= RESUME_ATTEMPTS) throw e
      await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt))
    }
    if (ended) return
  }
}
