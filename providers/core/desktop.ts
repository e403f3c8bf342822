/**
 * Create with a desktop when the request asks for computer use: the sandbox is created, then its desktop started;
 * a desktop that does not start (an image or template without one) removes the sandbox and fails the create as
 * `unsupported` (kept `unavailable` or `timeout_absent` when the provider did not answer), saying why.
 */
import { Effect } from "effect"
import type { ComputerDriver, CreateInput, ProviderError, ProviderErrorKind, SandboxProvider } from "../../src/providers/Provider.ts"

export const withDesktop = (
  provider: string,
  create: SandboxProvider["create"],
  destroy: SandboxProvider["destroy"],
  computer: ComputerDriver,
  fail: (kind: ProviderErrorKind, message: string) => ProviderError
): SandboxProvider["create"] =>
(input: CreateInput) =>
  input.computerUse !== true ? create(input) : Effect.flatMap(create(input), (sandbox) =>
    computer.start(sandbox).pipe(
      Effect.as(sandbox),
      Effect.catchAll((e) =>
        Effect.zipRight(
          Effect.ignore(destroy(sandbox)),
          Effect.fail(fail(e.kind === "unavailable" || e.kind === "timeout_absent" ? e.kind : "unsupported", `${provider} sandbox has no desktop: ${e.message}`))
        ))
    ))
