/** A held-open server-sent event stream for tests: its frames as they arrive (an `event: error` has no id), and its end. */
import { expect } from "vitest"

export interface SseFrame {
  readonly id: string | undefined
  readonly event: string
  readonly data: any
}

export const openSse = async (url: string, headers: Record<string, string>) => {
  const response = await fetch(url, { headers })
  expect(response.status).toBe(200)
  expect(response.headers.get("content-type")).toBe("text/event-stream")
  const frames: Array<SseFrame> = []
  let ended = false
  void (async () => {
    const decoder = new TextDecoder()
    let buffer = ""
    try {
      for await (const chunk of response.body!) {
        buffer += decoder.decode(chunk, { stream: true })
        let end: number
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          if (block.startsWith(":")) continue
          const fields: Record<string, string> = {}
          for (const line of block.split("\n")) {
            const i = line.indexOf(": ")
            if (i > 0) fields[line.slice(0, i)] = line.slice(i + 2)
          }
          frames.push({ id: fields["id"], event: fields["event"] ?? "", data: JSON.parse(fields["data"] ?? "null") })
        }
      }
    } catch {
      // the connection was cut
    }
    ended = true
  })()
  const until = async (what: string, done: () => boolean, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; frames: ${frames.map((f) => f.event).join(", ")}; ended: ${ended}`)
      await Bun.sleep(10)
    }
  }
  return {
    frames,
    ended: () => ended,
    /** Waits for a frame of this event type. */
    waitEvent: (event: string, timeoutMs = 30_000) => until(`an "${event}" frame`, () => frames.some((f) => f.event === event), timeoutMs),
    /** Waits for the server to end the stream. */
    waitEnd: (timeoutMs: number) => until("the end of the stream", () => ended, timeoutMs)
  }
}
