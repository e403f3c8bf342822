/**
 * What a plugin reads from the environment: a variable counts as set only when it is not blank, so an empty
 * `FOO_API_KEY=` (a compose file's placeholder) leaves the provider emulated instead of remote with an empty key.
 */
import { Config, type ConfigError, Effect, Option } from "effect"

/** The first of these variables that is set and not blank; undefined when none is. */
export const envValue = (...names: ReadonlyArray<string>): Effect.Effect<string | undefined, ConfigError.ConfigError> =>
  Effect.map(Effect.all(names.map((n) => Config.option(Config.string(n)))), (values) =>
    Option.getOrUndefined(Option.firstSomeOf(values.map((v) => Option.filter(v, (s) => s.trim() !== "")))))
