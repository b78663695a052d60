import { Config, Effect, Option } from "effect"

/**
 * An environment variable that is set and not empty, read through Effect's Config (so tests
 * provide a ConfigProvider instead of changing the process's environment).
 */
export const nonEmptyEnv = (name: string) =>
  Config.option(Config.nonEmptyString(name)).pipe(Effect.orElseSucceed(() => Option.none<string>()))
