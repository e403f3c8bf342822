/**
 * A sandbox's output on a followed event stream (`GET …/processes/{id}/events?follow=true`, answered by FastReads for
 * a plain follow, by the full stack otherwise) is data inside the gateway's frames, never frames of its own: a
 * process that writes what looks like server-sent events — an `exited` frame with a made-up id, a heartbeat, a
 * `retry:` line, CRs and NULs — on both streams is followed to its real end. Each frame is one of the gateway's
 * (ids 1..n in order, one `exited` with the status the process really ended with, then its `failed`), the forged bytes come
 * back exactly, base64 inside `stdout` and `stderr` events, and both paths send the same bytes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createReadySandbox, idempotencyKey, minimalSandbox } from "../support/sandbox.ts"
import { openGateway } from "../support/server.ts"

let gateway: Awaited<ReturnType<typeof openGateway>>
let sandboxId: string

beforeAll(async () => {
  gateway = await openGateway("followed-output@example.com")
  // The key is used here, so that a plain follow after it is FastReads' (a key due for its use to be recorded is not).
  sandboxId = (await createReadySandbox(gateway.http, gateway.auth, minimalSandbox())).id
}, 60_000)
afterAll(() => gateway?.server.stop())

/** What the sandbox writes on each stream: frames of its own making, as a follower would parse them if it could. */
const FORGED = "x\n\nid: 999\nevent: exited\ndata: {\"sequence\":999,\"type\":\"exited\",\"data\":{\"exit_code\":0}}\n\n: heartbeat\n\nretry: 1\r\nevent: completed\n\n"
/** Each stream gets FORGED and a NUL (which an environment variable cannot carry: printf writes it). */
const WRITTEN = `${FORGED}\u0000`

/** The frames of a stream, strictly: every block is a comment or exactly `id`, `event` and `data`, in that order. */
const framesOf = (text: string) => {
  expect(text.endsWith("\n\n")).toBe(true)
  const frames: Array<{ id: number; event: string; data: any }> = []
  for (const block of text.slice(0, -2).split("\n\n")) {
    if (block.startsWith(": ")) {
      expect(block).toBe(": heartbeat")
      continue
    }
    const lines = block.split("\n")
    expect(lines.map((l) => l.slice(0, l.indexOf(": ")))).toEqual(["id", "event", "data"])
    frames.push({ id: Number(lines[0]!.slice(4)), event: lines[1]!.slice(7), data: JSON.parse(lines[2]!.slice(6)) })
  }
  return frames
}

describe("a sandbox's output on a followed stream", () => {
  it("cannot forge frames: the gateway's own come in order to the real exit, the forged bytes inside them", async () => {
    const { server, http, auth } = gateway
    const started = await http.post(`/v1/sandboxes/${sandboxId}/processes`, {
      ...auth,
      body: { command: ["sh", "-c", "printf '%s\\000' \"$F\"; sleep 0.3; printf '%s\\000' \"$F\" >&2; exit 3"], environment: { F: FORGED } },
      headers: { "idempotency-key": idempotencyKey("forge") }
    })
    expect(started.status).toBe(202)
    const path = `/v1/sandboxes/${sandboxId}/processes/${started.body.id}/events`
    const headers = { authorization: `Bearer ${auth.token}`, "x-metal-project-id": auth.project }
    // Followed from the start, while it runs: FastReads' path.
    const followed = await (await fetch(`${server.url}${path}?follow=true`, { headers })).text()
    const frames = framesOf(followed)
    expect(frames.map((f) => f.id)).toEqual(frames.map((_, i) => i + 1))
    // Its real end: one `exited` with the status it ended with, then the `failed` a non-zero status makes it.
    expect(frames.map((f) => f.event)).toEqual(["queued", "started", "stdout", "stderr", "exited", "failed"])
    expect(frames.at(-2)).toMatchObject({ data: { type: "exited", data: { exit_code: 3 } } })
    expect(frames.at(-1)).toMatchObject({ data: { type: "failed", data: { code: "process_exit_nonzero", details: { exit_code: 3 } } } })
    const output = (type: string) =>
      Buffer.concat(frames.filter((f) => f.event === type).map((f) => Buffer.from(f.data.data.data_base64, "base64"))).toString("latin1")
    expect(output("stdout")).toBe(WRITTEN)
    expect(output("stderr")).toBe(WRITTEN)
    // The full stack's follow (an extra query parameter: FastReads hands it over) sends the same frames.
    const full = await (await fetch(`${server.url}${path}?follow=true&full=1`, { headers })).text()
    expect(full).toBe(followed.replaceAll(": heartbeat\n\n", ""))
  })
})
