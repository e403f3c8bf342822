/** A real webhook receiver on loopback for tests: records every request; each path answers as the test says. */

export interface Received {
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: string
  readonly json: any
  readonly at: number
}

/** What a path answers: a Response, or "hang" (never answers; the connection stays open until the client gives up). */
export type Behaviour = (request: Request, nth: number) => Response | "hang" | Promise<Response | "hang">

export interface Receiver {
  readonly port: number
  readonly url: (path: string) => string
  readonly received: Array<Received>
  /** Requests to one path. */
  readonly at: (path: string) => Array<Received>
  readonly on: (path: string, behaviour: Behaviour) => void
  /** Resolves once `check` holds over what was received (polls every 10 ms). */
  readonly waitFor: (check: (received: ReadonlyArray<Received>) => boolean, timeoutMs?: number, what?: string) => Promise<void>
  readonly stop: () => void
}

export const startReceiver = (hostLabel = "127.0.0.1"): Receiver => {
  const received: Array<Received> = []
  const behaviours = new Map<string, Behaviour>()
  const counts = new Map<string, number>()
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    fetch: async (request) => {
      const path = new URL(request.url).pathname
      const body = await request.text()
      let json: any
      try {
        json = JSON.parse(body)
      } catch {
        json = undefined
      }
      received.push({ path, headers: Object.fromEntries(request.headers), body, json, at: Date.now() })
      const nth = (counts.get(path) ?? 0) + 1
      counts.set(path, nth)
      const answer = await (behaviours.get(path) ?? (() => new Response("ok")))(request, nth)
      if (answer === "hang") return new Promise<Response>(() => undefined)
      return answer
    }
  })
  const port = server.port!
  return {
    port,
    url: (path) => `http://${hostLabel}:${port}${path}`,
    received,
    at: (path) => received.filter((r) => r.path === path),
    on: (path, behaviour) => void behaviours.set(path, behaviour),
    waitFor: async (check, timeoutMs = 30_000, what = "the expected deliveries") => {
      const deadline = Date.now() + timeoutMs
      while (!check(received)) {
        if (Date.now() > deadline) throw new Error(`receiver: timed out waiting for ${what}; got ${received.length}: ${received.map((r) => `${r.path} ${r.headers["metal-event-type"]}`).join(", ")}`)
        await Bun.sleep(10)
      }
    },
    stop: () => void server.stop(true)
  }
}
