import { Config, ConfigError, Effect, Either, Option } from "effect"

/**
 * An environment variable that is set and not empty, read through Effect's Config (so tests
 * provide a ConfigProvider instead of changing the process's environment).
 */
export const nonEmptyEnv = (name: string) =>
  Config.option(Config.nonEmptyString(name)).pipe(Effect.orElseSucceed(() => Option.none<string>()))

/**
 * The same variable as a Config to fall back on (`Options.withFallbackConfig`): an empty one is
 * missing, as if it were unset, rather than a bad value.
 */
export const envVariable = (name: string): Config.Config<string> =>
  Config.string(name).pipe(
    Config.mapOrFail((value) =>
      value === "" ? Either.left(ConfigError.MissingData([name], `${name} is empty`)) : Either.right(value)
    )
  )
