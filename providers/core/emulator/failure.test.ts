/** The emulators' failure helper: a thrown HttpFailure, a runtime failure and a crash, each in the provider's body. */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest"
import { runtimeError } from "../../../src/runtime/LocalRuntime.ts"
import { answering, asHttpFailure, failureAnswer, HttpFailure } from "./failure.ts"

/** A provider whose errors are `{error: {code, message}}`, with codes by status for runtime failures. */
const CODES: Readonly<Record<number, string>> = { 404: "not_found", 409: "conflict" }
const answer = failureAnswer("vercel", (f) => Response.json({ error: { code: f.code ?? "error", message: f.message } }, { status: f.status }), {
  codeOf: (status) => CODES[status]
})
const read = async (response: Response) => ({ status: response.status, body: await response.json() })

describe("emulator failures", () => {
  let stderr: ReturnType<typeof vi.spyOn>
  beforeEach(() => {
    stderr = vi.spyOn(console, "error").mockImplementation(() => {})
  })
  afterEach(() => stderr.mockRestore())

  it("answers a thrown HttpFailure with its own status, message and code, in the provider's body", async () => {
    expect(await read(answer(new HttpFailure(410, "Session s1 is stopped", "sandbox_stopped")))).toEqual({
      status: 410,
      body: { error: { code: "sandbox_stopped", message: "Session s1 is stopped" } }
    })
    expect(await read(answer(new HttpFailure(400, "limit must be between 1 and 100")))).toEqual({
      status: 400,
      body: { error: { code: "error", message: "limit must be between 1 and 100" } }
    })
  })

  it("answers a runtime failure with the status of its kind, its own message and the provider's code for that status", async () => {
    expect(await read(answer(runtimeError("not_found", "no such file: /workspace/a")))).toEqual({
      status: 404,
      body: { error: { code: "not_found", message: "no such file: /workspace/a" } }
    })
    expect((await read(answer(runtimeError("conflict", "the sandbox is paused")))).status).toBe(409)
    expect((await read(answer(runtimeError("invalid", "the path escapes the sandbox")))).status).toBe(400)
    expect(stderr).not.toHaveBeenCalled()
  })

  it("answers anything else as a 500 without its text (logged for the operator, never sent)", async () => {
    const crash = new TypeError("undefined is not an object (evaluating 'sandbox.jail')")
    expect(await read(answer(crash))).toEqual({ status: 500, body: { error: { code: "error", message: "internal error" } } })
    expect(await read(answer("a thrown string"))).toEqual({ status: 500, body: { error: { code: "error", message: "internal error" } } })
    expect(stderr).toHaveBeenCalledWith("vercel emulator: unexpected failure", crash)
  })

  it("takes a provider's own status for runtime failures, and leaves a thrown HttpFailure as it is", () => {
    const statusOf = (e: unknown) => ((e as { kind?: string }).kind === "conflict" ? 422 : 500)
    expect(asHttpFailure(runtimeError("conflict", "busy"), "blaxel", { statusOf })).toMatchObject({ status: 422, message: "busy", code: undefined })
    const thrown = new HttpFailure(409, "already exists", "CONFLICT")
    expect(asHttpFailure(thrown, "blaxel", { statusOf })).toBe(thrown)
  })

  it("answers with what a handler answers, or with what it throws (async or not) in the provider's body", async () => {
    const ok = new Response("fine", { status: 201 })
    expect(await answering(answer, async () => ok)).toBe(ok)
    expect(await answering(answer, () => undefined)).toBeUndefined() // a WebSocket upgrade the handler took
    expect((await read(await answering(answer, async () => {
      throw new HttpFailure(404, "Sandbox s not found", "not_found")
    })))).toEqual({ status: 404, body: { error: { code: "not_found", message: "Sandbox s not found" } } })
    expect((await answering(answer, () => {
      throw runtimeError("conflict", "paused")
    })).status).toBe(409)
  })
})
