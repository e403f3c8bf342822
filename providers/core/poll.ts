/**
 * Waiting for a provider to reach a state: `check` answers Some when done (or fails when it never will), and
 * is asked again every `interval` until `timeout`, when `onTimeout` is the failure.
 */
import { Duration, Effect, Option, Schedule } from "effect"

export const pollUntil = <A, E, R>(
  check: Effect.Effect<Option.Option<A>, E, R>,
  options: { readonly interval: Duration.DurationInput; readonly timeout: Duration.DurationInput; readonly onTimeout: () => E }
): Effect.Effect<A, E, R> =>
  check.pipe(
    // passthrough: the repeat ends with the last answer, the first Some.
    Effect.repeat(Schedule.spaced(options.interval).pipe(Schedule.whileInput((answer: Option.Option<A>) => Option.isNone(answer)), Schedule.passthrough)),
    Effect.map(Option.getOrThrow),
    Effect.timeoutFail({ duration: options.timeout, onTimeout: options.onTimeout })
  )
