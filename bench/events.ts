/** Event commit → webhook received on loopback, and → frame on the live event stream (issue 10). */
import { type BenchGateway, ROUNDS, stats } from "./measure.ts"
import { report } from "./report.ts"

export const benchEvents = async ({ server, http, boot }: BenchGateway) => {
  // 5. event commit → webhook received, and → frame on the live event stream. `occurred_at` is stamped inside the
  // committing transaction, so each sample is an upper bound of commit → arrival (same clock, 1 ms resolution).
  let hookWaiter: ((ms: number) => void) | undefined
  let streamWaiter: ((ms: number) => void) | undefined
  const receiver = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: async (request) => {
    const at = Date.now()
    const body = (await request.json()) as { occurred_at: string }
    hookWaiter?.(at - Date.parse(body.occurred_at))
    return new Response("ok")
  } })
  const hook = await http.post(`/v1/organizations/${boot.organization_id}/webhooks`, {
    token: boot.user_token,
    body: { name: "bench", url: `http://127.0.0.1:${receiver.port}/hook`, event_types: ["project.updated"] }
  })
  if (hook.status !== 201) throw new Error(`webhook create answered ${hook.status}: ${hook.text}`)
  const streamAbort = new AbortController()
  const stream = await fetch(`${server.url}/v1/events/stream?project_id=${boot.project_id}`, { headers: { authorization: `Bearer ${boot.user_token}` }, signal: streamAbort.signal })
  void (async () => {
    let buffer = ""
    const decoder = new TextDecoder()
    try {
      for await (const chunk of stream.body!) {
        const at = Date.now()
        buffer += decoder.decode(chunk, { stream: true })
        let end: number
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const data = buffer.slice(0, end).split("\n").find((line) => line.startsWith("data: "))
          buffer = buffer.slice(end + 2)
          if (data !== undefined) streamWaiter?.(at - Date.parse(JSON.parse(data.slice(6)).occurred_at))
        }
      }
    } catch {
      // aborted at the end
    }
  })()
  const hookLatency: Array<number> = []
  const streamLatency: Array<number> = []
  for (let i = 0; i < ROUNDS + 3; i++) {
    const delivered = new Promise<number>((resolve) => (hookWaiter = resolve))
    const framed = new Promise<number>((resolve) => (streamWaiter = resolve))
    await http.patch(`/v1/projects/${boot.project_id}`, { token: boot.user_token, body: { name: `Bench ${i}`, slug: `bench-${i}` } })
    const [hookMs, streamMs] = await Promise.all([delivered, framed])
    if (i >= 3) {
      hookLatency.push(hookMs)
      streamLatency.push(streamMs)
    }
  }
  streamAbort.abort()
  receiver.stop(true)
  report("event commit → webhook received", stats(hookLatency), undefined, "loopback")
  report("event commit → event stream frame", stats(streamLatency), undefined, "≤ 100 ms")
}
