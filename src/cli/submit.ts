import { Command, Options } from "@effect/cli"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { Effect, Option, Stream } from "effect"
import { InvalidInput } from "../domain/errors.js"
import { ClientRequestId } from "../domain/ids.js"
import { decodeField, parseJsonField } from "../domain/input.js"
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
      return yield* fs
        .readFileString(file.value)
        .pipe(
          Effect.mapError((error) => new InvalidInput({ field: "--payload-file", reason: error.message }))
        )
    }
    if (Option.isNone(inline)) {
      return yield* new InvalidInput({
        field: "--payload",
        reason: "required (or --payload-file, or --payload -)"
      })
    }
    if (inline.value !== "-") return inline.value
    return yield* NodeStream.stdin.pipe(Stream.decodeText(), Stream.mkString)
  })

export const submit = Command.make("submit", { ...storeOptions, id, payload, payloadFile }, (args) =>
  Effect.gen(function* () {
    const clientRequestId = yield* decodeField("--id", ClientRequestId)(args.id)
    const field = Option.isSome(args.payloadFile) ? "--payload-file" : "--payload"
    const json = yield* parseJsonField(field, yield* payloadText(args.payload, args.payloadFile))
    const payloadObject = yield* decodeField(field, JsonObject)(json)
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
    "Queue a task; prints its receipt. The same id and payload return the same receipt."
  ),
  Command.provide((args) => storeLayer(args))
)
