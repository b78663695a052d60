import { Console } from "effect"

/** Every command prints exactly one JSON document on stdout. */
export const printJson = (value: unknown) => Console.log(JSON.stringify(value))
