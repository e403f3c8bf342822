/** Readable validation issues (src/domain/Issues.ts): one issue per field, literal unions as their allowed values. */
import { Either, ParseResult, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { issuesSummary, readableIssues } from "../../src/domain/Issues.ts"
import { StartProcess } from "../../src/domain/Runtime.ts"
import { PROVIDERS, SandboxRequest } from "../../src/domain/Sandbox.ts"

const issuesOf = (schema: Schema.Schema<any, any>, value: unknown) => {
  const decoded = Schema.decodeUnknownEither(schema, { errors: "all" })(value)
  if (Either.isRight(decoded)) throw new Error("expected a failure")
  return readableIssues(ParseResult.ArrayFormatter.formatErrorSync(decoded.left))
}
const base = { source: { kind: "environment", environment: "metal/base" }, resources: { vcpu: 1, memory_mb: 512 }, lifecycle: { runtime_timeout_seconds: 60 } }

describe("readableIssues", () => {
  it("a refused literal union is one issue listing the allowed values (an optional field's undefined left out)", () => {
    const issues = issuesOf(SandboxRequest, { ...base, provider: "nope" })
    expect(issues).toEqual([{ path: "provider", message: `provider must be one of: ${[...PROVIDERS, "auto"].join(", ")}`, allowed: [...PROVIDERS, "auto"] }])
    expect(issuesSummary(issues)).toBe(issues[0]!.message)
    expect(issuesOf(SandboxRequest, { ...base, lifecycle: { runtime_timeout_seconds: 60, on_idle_timeout: "stop" } })[0]).toMatchObject({
      path: "lifecycle.on_idle_timeout",
      allowed: ["destroy", "pause"]
    })
  })

  it("a string where an argv array goes says so; other type mismatches name the type", () => {
    expect(issuesOf(StartProcess, { command: "ls -la" })).toEqual([
      { path: "command", message: "command is an argv array: send the program and its arguments as a list of strings, e.g. [\"sh\", \"-c\", \"ls -la\"]" }
    ])
    expect(issuesOf(SandboxRequest, { ...base, regions: "eu" })[0]?.message).toBe("regions must be an array")
    expect(issuesOf(SandboxRequest, { ...base, resources: { vcpu: "1", memory_mb: 512 } })[0]?.message).toBe("resources.vcpu must be a number")
  })

  it("other issues keep Schema's words, with the field in the summary, and count the rest", () => {
    const issues = issuesOf(SandboxRequest, { ...base, resources: { vcpu: 1, memory_mb: 64 }, lifecycle: { runtime_timeout_seconds: 0 } })
    expect(issues.map((i) => i.path)).toEqual(["resources.memory_mb", "lifecycle.runtime_timeout_seconds"])
    expect(issuesSummary(issues)).toMatch(/^resources\.memory_mb: .+ \(and 1 more in details\.issues\)$/)
    expect(issuesSummary([])).toBe("Request validation failed")
  })

  it("a huge refused value is not sent back whole", () => {
    const [issue] = readableIssues([{ path: ["x"], message: `Expected a string at most 10 character(s) long, actual "${"a".repeat(10_000)}"` }])
    expect(issue!.message.length).toBeLessThanOrEqual(501)
  })
})
