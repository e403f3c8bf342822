/** The execution-id codec: round trips, ids written before it, and malformed ids refused with a reason. */
import { Effect, Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { executionIdCodec, IdPart, positivePart } from "./executionId.ts"

const codec = executionIdCodec("vercel", "vercel", Schema.Struct({
  sessionId: IdPart,
  cmdId: IdPart,
  maxOutputBytes: positivePart(10 * 1024 * 1024),
  timeoutSeconds: positivePart(3600)
}))
/** How the adapters wrote ids by hand before the codec. */
const handWritten = (prefix: string, parts: unknown) => `${prefix}:${Buffer.from(JSON.stringify(parts)).toString("base64url")}`
const reasonOf = (id: string) => Either.getLeft(codec.parse(id)).pipe((o) => (o._tag === "Some" ? o.value : "parsed"))

describe("executionIdCodec", () => {
  it("round-trips the parts, in the form the adapters wrote by hand (ids already stored still decode)", () => {
    const parts = { sessionId: "sess_1", cmdId: "cmd ü/😀", maxOutputBytes: 1024, timeoutSeconds: 60 }
    const id = codec.encode(parts)
    expect(id).toBe(handWritten("vercel", ["sess_1", "cmd ü/😀", 1024, 60]))
    expect(codec.parse(id)).toEqual(Either.right(parts))
    expect(Effect.runSync(codec.decode(id))).toEqual(parts)
    expect(codec.owns(id)).toBe(true)
  })

  it("gives a trailing part an older id lacks its default", () => {
    expect(codec.parse(handWritten("vercel", ["s", "c"]))).toEqual(Either.right({ sessionId: "s", cmdId: "c", maxOutputBytes: 10 * 1024 * 1024, timeoutSeconds: 3600 }))
    expect(codec.parse(handWritten("vercel", ["s", "c", 5]))).toEqual(Either.right({ sessionId: "s", cmdId: "c", maxOutputBytes: 5, timeoutSeconds: 3600 }))
  })

  it("refuses an id of another prefix, or of a prefix that only starts the same", () => {
    expect(reasonOf(handWritten("runloop", ["s", "c"]))).toBe(`it does not start with "vercel:"`)
    expect(reasonOf(handWritten("vercel-pty", ["s", "c"]))).toBe(`it does not start with "vercel:"`)
    expect(codec.owns("vercel-pty:x")).toBe(false)
  })

  it("refuses a body that is not base64url of a JSON array", () => {
    for (const id of ["vercel:", "vercel:!!!", `vercel:${Buffer.from("not json").toString("base64url")}`, handWritten("vercel", { sessionId: "s" })]) {
      expect(reasonOf(id)).toMatch(/^its body is not base64url of a JSON array/)
    }
  })

  it("refuses parts of the wrong type, empty where they must not be, out of range or too many", () => {
    expect(reasonOf(handWritten("vercel", [1, "c"]))).toMatch(/^its parts are not \(sessionId, cmdId, maxOutputBytes, timeoutSeconds\)/)
    expect(reasonOf(handWritten("vercel", ["", "c"]))).toMatch(/sessionId/)
    expect(reasonOf(handWritten("vercel", ["s"]))).toMatch(/cmdId/)
    expect(reasonOf(handWritten("vercel", ["s", "c", 0]))).toMatch(/maxOutputBytes/)
    expect(reasonOf(handWritten("vercel", ["s", "c", 1.5]))).toMatch(/maxOutputBytes/)
    expect(reasonOf(handWritten("vercel", ["s", "c", null]))).toMatch(/maxOutputBytes/)
    expect(reasonOf(handWritten("vercel", ["s", "c", 1, 2, "extra"]))).toBe("it has 5 parts, at most 4 expected")
  })

  it("fails decode with the provider's invalid_request, saying which id and why", () => {
    const result = Effect.runSync(Effect.either(codec.decode(handWritten("vercel", ["s", 7]))))
    if (Either.isRight(result)) throw new Error("expected a failure")
    expect(result.left.provider).toBe("vercel")
    expect(result.left.kind).toBe("invalid_request")
    expect(result.left.retryable).toBe(false)
    expect(result.left.message).toMatch(/^vercel:\S+ is not a vercel execution id \(vercel:…\): its parts are not .*cmdId/)
  })
})
