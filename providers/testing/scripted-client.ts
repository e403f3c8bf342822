/**
 * Test support for adapters in `remote` mode: an HttpClient that expects exactly the given requests, in order,
 * answers each one with the reply its step makes, and dies on anything else.
 */
import { HttpClient, HttpClientError, type HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { Effect } from "effect"

export interface Call {
  readonly method: string
  readonly url: URL
  readonly headers: Readonly<Record<string, string>>
  readonly request: HttpClientRequest.HttpClientRequest
}
export type Reply = Response | "transport-error"
export interface Step {
  readonly method: string
  readonly path: string
  readonly reply: (call: Call) => Reply | Promise<Reply>
}

/** An HttpClient that expects exactly these requests, in order, and answers each one. */
export const scripted = (steps: Array<Step>) => {
  const calls: Array<Call> = []
  const client = HttpClient.make((request, url) =>
    Effect.gen(function*() {
      const call: Call = { method: request.method, url, headers: request.headers, request }
      calls.push(call)
      const step = steps.shift()
      if (step === undefined) return yield* Effect.die(new Error(`unexpected request ${request.method} ${url}`))
      if (step.method !== request.method || step.path !== url.pathname) {
        return yield* Effect.die(new Error(`expected ${step.method} ${step.path}, got ${request.method} ${url.pathname}`))
      }
      const reply = yield* Effect.promise(async () => step.reply(call))
      if (reply === "transport-error") {
        return yield* Effect.fail(new HttpClientError.RequestError({ request, reason: "Transport", cause: new Error("connection reset") }))
      }
      return HttpClientResponse.fromWeb(request, reply)
    })
  )
  return { client, calls, left: () => steps.length }
}
export const bodyBytes = (call: Call) => {
  const body = call.request.body
  if (body._tag !== "Uint8Array") throw new Error(`expected a byte body, got ${body._tag}`)
  return body.body
}
export const bodyJson = (call: Call) => JSON.parse(new TextDecoder().decode(bodyBytes(call))) as unknown
export const json = (body: unknown, status = 200) => Response.json(body, { status })
