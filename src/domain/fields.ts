/**
 * Building blocks for the schemas that clients and models see: the MCP tools' arguments and
 * answers (`JSONSchema.make` turns them into the advertised JSON Schemas).
 *
 * Schema's own `Int`, `between`, `minLength`, `positive`, … are not used there: they carry
 * internal titles (`"int"`, `"between(0, 60)"`) that the generator advertises, `Int` has an
 * identifier that becomes a `$ref` with no `type` beside it, and a failing one says
 * `Expected <its description>`. Every refinement here carries a `jsonSchema` annotation with
 * plain JSON Schema keywords only (so the generator merges it into the node, and a `description`
 * or `default` annotated on it is kept), no title and no identifier, and fails with a message in
 * words that never repeats the value it was given.
 */
import { Predicate, Schema, SchemaAST } from "effect"

/** Inclusive bounds, as JSON Schema's `minimum` and `maximum`. */
export interface Bounds {
  readonly minimum?: number
  readonly maximum?: number
}

/** The bounds in words: ` from 0 to 60`, ` of at least 1`, or nothing. */
export const boundsText = ({ minimum, maximum }: Bounds): string =>
  minimum !== undefined && maximum !== undefined
    ? ` from ${minimum} to ${maximum}`
    : minimum !== undefined
      ? ` of at least ${minimum}`
      : maximum !== undefined
        ? ` of at most ${maximum}`
        : ""

/**
 * A message annotation saying what the whole value must be, whatever is wrong with it (a wrong
 * type, a fraction, out of bounds, another literal): `override` hides the inner messages.
 */
export const mustBe = (expected: string) => () => ({ message: `must be ${expected}`, override: true })

const within =
  ({ minimum, maximum }: Bounds) =>
  (value: number): boolean =>
    (minimum === undefined || value >= minimum) && (maximum === undefined || value <= maximum)

/** A JSON string. */
export const Text = Schema.String.annotations({ message: () => "must be a string" })

/** A JSON number within `bounds`. (NaN and the infinities, which JSON cannot carry, are refused.) */
export const JsonNumber = (bounds: Bounds = {}) =>
  Schema.Number.pipe(
    Schema.filter((value) => Number.isFinite(value) && within(bounds)(value), {
      jsonSchema: { ...bounds },
      message: mustBe(`a number${boundsText(bounds)}`)
    })
  )

/** A JSON integer (a safe one) within `bounds`, advertised inline as `"type": "integer"`. */
export const Integer = (bounds: Bounds = {}) =>
  Schema.Number.pipe(
    // The Int schema id tells the generator that `type: "integer"` refines `type: "number"`.
    Schema.filter((value) => Number.isSafeInteger(value), {
      schemaId: Schema.IntSchemaId,
      jsonSchema: { type: "integer" }
    }),
    Schema.filter(within(bounds), {
      jsonSchema: { ...bounds },
      message: mustBe(`an integer${boundsText(bounds)}`)
    })
  )

/**
 * Any JSON value. Not `Schema.Unknown`: its keyword carries the built-in title `"unknown"`,
 * which would be advertised; this keyword carries no annotation at all.
 */
export const JsonValue = Schema.make<unknown>(new SchemaAST.UnknownKeyword())

/**
 * A JSON object of whatever shape, decoded as the very object given. Not `Schema.Record`,
 * which rebuilds the object by assignment: a `__proto__` key would be lost (and would set the
 * copy's prototype), so three payloads differing only there would hash alike. JSON keys here
 * are ordinary data, `__proto__`, `constructor` and `prototype` included.
 */
export const JsonObject = Schema.declare(
  (value: unknown): value is { readonly [key: string]: unknown } => Predicate.isRecord(value),
  {
    jsonSchema: { type: "object", required: [], properties: {}, additionalProperties: {} },
    description: "a JSON object",
    message: mustBe("a JSON object")
  }
)
export type JsonObject = typeof JsonObject.Type
