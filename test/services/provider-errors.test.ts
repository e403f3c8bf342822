/**
 * The translation of provider failures into API errors (src/services/sandboxes/ProviderErrors.ts) for what the
 * end-to-end tests cannot provoke on demand: a crashed agent's JavaScript in a process error, a remote provider's
 * wording, a failed create attempt's status line, an emulator handler that throws something other than a runtime
 * failure. None of the provider's words may come through.
 */
import { describe, expect, it } from "vitest"
import { emulatorMessage } from "../../providers/core/emulator/server.ts"
import { ProviderError, type ProviderErrorKind } from "../../src/providers/Provider.ts"
import { actionFailure, fileFailure, processFailure, publicAttempt } from "../../src/services/sandboxes/ProviderErrors.ts"
import { RuntimeError } from "../../src/runtime/LocalRuntime.ts"

const failure = (kind: ProviderErrorKind, message: string, status?: number) =>
  new ProviderError({ provider: "daytona", kind, message, retryable: kind === "unavailable", status })

const JS = "daytona session command answered 500: undefined is not an object (evaluating '(await agentJson(…)).events.map')"
const HOST = "e2b read file answered 400: ENAMETOOLONG: name too long, open '/var/lib/gateway/sandboxes/j1/root/workspace/x'"

describe("provider failures in the user's terms", () => {
  it("a process error never carries the provider's text (a crashed agent's JavaScript included)", () => {
    const error = processFailure(failure("unavailable", JS, 500), { command: ["python3", "app.py"], cwd: null })
    expect(error).toEqual({
      code: "provider_unavailable",
      message: "The sandbox or its provider did not answer while trying to run the command; try again",
      retryable: true,
      details: { reason: "provider_unavailable", provider: "daytona" }
    })
    expect(processFailure(failure("invalid_request", "e2b process stream: invalid_argument: cwd /srv does not exist"), { command: ["ls"], cwd: "/srv" }))
      .toMatchObject({ message: "The working directory does not exist: /srv", details: { reason: "cwd_not_found" } })
    expect(processFailure(failure("invalid_request", "exec: \"nope\": executable file not found in $PATH"), { command: ["nope"], cwd: null }))
      .toMatchObject({ message: "The command was not found: nope", details: { reason: "command_not_found" } })
  })

  it("a file error names the path asked for, never a host path or an errno", () => {
    const error = fileFailure("read", "/workspace/x", failure("invalid_request", HOST, 400))
    expect(error).toEqual({
      customer: true,
      error: { code: "invalid_path", message: "The file name is too long: /workspace/x", retryable: false, details: { reason: "name_too_long", provider: "daytona" } }
    })
    // A provider that failed outright: retried, and still nothing of its text.
    const down = fileFailure("list", "/workspace", failure("unavailable", JS, 502))
    expect(down.customer).toBe(false)
    expect(down.error.message).toBe("The sandbox or its provider did not answer while trying to list /workspace; try again")
    // The file system's own refusals that come back as server errors are still the user's business.
    expect(fileFailure("write", "/workspace/big", failure("unavailable", "upload answered 500: ENOSPC: no space left on device, write", 500)).error)
      .toMatchObject({ code: "runtime_operation_failed", message: "The sandbox's disk is full", retryable: false, details: { reason: "no_space" } })
  })

  it("lifecycle and endpoint failures, and failed create attempts, say what was being done", () => {
    expect(actionFailure("sandbox_pause_failed", "pause the sandbox", failure("invalid_request", "daytona stop answered 400: state machine: cannot stop a sandbox in state 'archiving'")))
      .toEqual({ code: "sandbox_pause_failed", message: "The provider refused to pause the sandbox", retryable: false, details: { reason: "provider_invalid_request", provider: "daytona" } })
    const attempt = { attempt_index: 0, provider: "daytona", outcome: "failed", code: "provider_unavailable", message: "daytona create sandbox answered 503: upstream connect error", unmet_requirements: [] } as const
    expect(publicAttempt(attempt).message).toBe("The provider did not answer")
    expect(publicAttempt({ ...attempt, code: "provider_auth_error", message: "daytona is not configured" }).message).toBe("daytona is not configured")
    expect(publicAttempt({ ...attempt, outcome: "ineligible", code: "capability_unsupported", message: "needs pause" }).message).toBe("needs pause")
  })

  it("an emulator answers a crash as an internal error, and a runtime failure with its own message", () => {
    const original = console.error
    console.error = () => {}
    try {
      expect(emulatorMessage(new TypeError("undefined is not an object (evaluating 'x.events.map')"), "daytona")).toBe("internal error")
    } finally {
      console.error = original
    }
    expect(emulatorMessage(new RuntimeError({ kind: "not_found", message: "/workspace/x does not exist" }), "daytona")).toBe("/workspace/x does not exist")
  })
})
