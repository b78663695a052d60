import { Command, Options } from "@effect/cli"
import * as FileSystem from "@effect/platform/FileSystem"
import { checkRequestId, checkSubmittable } from "../domain/mcpTask.js"
import { parseTargets } from "../domain/broadcast.js"
import { submitBroadcast } from "../broadcast/submit.js"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { Effect, Option, Stream } from "effect"
import { InvalidInput } from "../domain/errors.js"
import { ClientRequestId } from "../domain/ids.js"
import { DefaultMaxPayloadBytes } from "../domain/submission.js"
import { decodeField, decodeUtf8Field, parseJsonField } from "../domain/input.js"
import { JsonObject } from "../domain/Task.js"
import { TaskStore } from "../services/TaskStore.js"
import { printJson } from "./output.js"
import { storeLayer, storeOptions } from "./options.js"

const id = Options.text("id").pipe(Options.withDescription("Your request id (1-200 printable characters)"))
const payload = Options.text("payload").pipe(
  Options.withDescription("The payload as JSON, or - to read it from stdin"),
  Options.optional
)
const payloadFile = Options.file("payload-file").pipe(
  Options.withDescription("Read the payload JSON from this file"),
  Options.optional
)
const broadcast = Options.text("broadcast").pipe(
  Options.withDescription(
    "Queue one task per target under one group: provider:model pairs separated by commas (claude:MODEL,codex:MODEL, at most 8). The payload is then the part they share ({prompt}, a CLI's work_dir); prints the group receipt"
  ),
  Options.optional
)

/**
 * The most a payload's text may be as given: twice the payload limit, room for any formatting
 * of a payload whose canonical form fits. Reading stops there, so a runaway pipe costs nothing.
 */
export const MaxPayloadTextBytes = 2 * DefaultMaxPayloadBytes

/**
 * Read at most MaxPayloadTextBytes from `source` and decode it as strict UTF-8: invalid bytes
 * are refused, never replaced, since a replaced byte would give another payload the same hash.
 */
const readBounded = <E>(field: string, source: Stream.Stream<Uint8Array, E>) =>
  source.pipe(
    Stream.mapError((error) => new InvalidInput({ field, reason: `could not be read (${String(error)})` })),
    Stream.runFoldEffect({ chunks: new Array<Uint8Array>(), size: 0 }, (kept, chunk) =>
      kept.size + chunk.length > MaxPayloadTextBytes
        ? Effect.fail(
            new InvalidInput({
              field,
              reason: `is over ${MaxPayloadTextBytes} bytes; a payload's limit is ${DefaultMaxPayloadBytes} bytes`
            })
          )
        : Effect.sync(() => {
            kept.chunks.push(chunk)
            return { chunks: kept.chunks, size: kept.size + chunk.length }
          })
    ),
    Effect.flatMap(({ chunks }) => decodeUtf8Field(field, Buffer.concat(chunks)))
  )

/** The payload text from exactly one source; stdin and file keep prompts off the process list. */
const payloadText = (inline: Option.Option<string>, file: Option.Option<string>) =>
  Effect.gen(function* () {
    if (Option.isSome(inline) && Option.isSome(file)) {
      return yield* new InvalidInput({
        field: "--payload",
        reason: "give --payload or --payload-file, not both"
      })
    }
    if (Option.isSome(file)) {
      const fs = yield* FileSystem.FileSystem
      return yield* readBounded("--payload-file", fs.stream(file.value))
    }
    if (Option.isNone(inline)) {
      return yield* new InvalidInput({
        field: "--payload",
        reason: "required (or --payload-file, or --payload -)"
      })
    }
    if (inline.value !== "-") return inline.value
    return yield* readBounded("--payload", NodeStream.stdin)
  })

const submitOptions = { ...storeOptions, id, payload, payloadFile, broadcast }

export const submit = Command.make("submit", submitOptions, (args) =>
  Effect.gen(function* () {
    const clientRequestId = yield* decodeField("--id", ClientRequestId)(args.id)
    yield* checkRequestId(clientRequestId, "--id")
    // Checked before the payload is read: a bad target list is a usage error of its own.
    const targets = Option.isSome(args.broadcast)
      ? Option.some(yield* parseTargets(args.broadcast.value, "--broadcast"))
      : Option.none()
    const field = Option.isSome(args.payloadFile) ? "--payload-file" : "--payload"
    const json = yield* parseJsonField(field, yield* payloadText(args.payload, args.payloadFile))
    const payloadObject = yield* decodeField(field, JsonObject)(json)
    if (Option.isSome(targets)) {
      const fields = { targets: "--broadcast", payload: field }
      const request = { clientRequestId, targets: targets.value, payload: payloadObject }
      return yield* printJson(yield* submitBroadcast(request, fields))
    }
    yield* checkSubmittable(payloadObject, field)
    const store = yield* TaskStore
    const receipt = yield* store.submit({ clientRequestId, payload: payloadObject }).pipe(
      // The store names its own field; on the command line the field is the flag.
      Effect.mapError((error) =>
        error._tag === "InvalidInput" && error.field === "payload"
          ? new InvalidInput({ field, reason: error.reason })
          : error
      )
    )
    yield* printJson(receipt)
  })
).pipe(
  Command.withDescription(
    "Queue a task; prints its receipt. The same id and payload return the same receipt. With --broadcast, one task per target under one group."
  ),
  Command.provide((args) => storeLayer(args))
)
