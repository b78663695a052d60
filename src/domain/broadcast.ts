/**
 * A broadcast: one prompt to several providers, queued as one task per provider under one group.
 * The pure parts: the targets and their command-line spelling (`claude:MODEL,codex:MODEL`), each
 * member's payload and request id, the group record's payload and result, and a group's state.
 * The effects that submit and read a group are in `src/broadcast/`.
 */
import type { ParseResult } from "effect"
import { Either, Schema } from "effect"
import { InvalidInput, InvalidRecord } from "./errors.js"
import { Integer, JsonObject, Text } from "./fields.js"
import type { TaskId } from "./ids.js"
import { ClientRequestId, LoneSurrogate, Printable, TaskId as TaskIdSchema } from "./ids.js"
import { describeParseError } from "./input.js"
import { BroadcastProvider, checkSubmittable, MemberRequestPrefix } from "./mcpTask.js"
import { ProviderPayload } from "./provider.js"
import type { TaskState, TaskView } from "./Task.js"
import { Receipt, TaskView as TaskViewSchema } from "./Task.js"

/** At most this many members in a group: a second (or eighth) opinion, not a fan-out queue. */
export const MaxTargets = 8

/** A provider as a target names it: no `:` or `,`, so `provider:model,…` reads one way only. */
export const TargetProvider = Text.pipe(
  Schema.pattern(/^[A-Za-z0-9._-]{1,100}$/, {
    message: () => "must be 1-100 letters, digits, '.', '_' or '-'"
  })
).annotations({ description: "The provider that runs this member: claude, codex, ollama, openai, fake-echo" })

/** A model as a target names it: printable, no `,` (models may hold `:`, as Ollama's do). */
export const TargetModel = Text.pipe(
  Schema.filter((text) => text.length >= 1 && text.length <= 200, {
    message: () => "must be 1-200 characters",
    jsonSchema: { minLength: 1, maxLength: 200 }
  }),
  Schema.filter((text) => Printable.test(text) && !LoneSurrogate.test(text) && !text.includes(","), {
    message: () => "must be printable characters other than ','",
    jsonSchema: {}
  })
).annotations({ description: "The model this member asks its provider for" })

export const Target = Schema.Struct({ provider: TargetProvider, model: TargetModel }).annotations({
  description: "One member of the group: a provider and the model it is asked for",
  message: () => ({ message: "must be an object {provider, model}", override: false })
})
export type Target = typeof Target.Type

const targetKey = (target: Target) => `${target.provider}\u0000${target.model}`

/** 1-8 distinct targets, in the order the members are queued and shown. */
export const Targets = Schema.Array(Target)
  .annotations({
    message: () => ({ message: "must be an array of {provider, model}", override: false })
  })
  .pipe(
    Schema.filter((targets) => targets.length >= 1 && targets.length <= MaxTargets, {
      message: () => `must name 1 to ${MaxTargets} targets`,
      jsonSchema: { minItems: 1, maxItems: MaxTargets }
    }),
    Schema.filter((targets) => new Set(targets.map(targetKey)).size === targets.length, {
      message: () => "must not name the same provider and model twice",
      jsonSchema: {}
    })
  )

/**
 * The targets `claude:MODEL,codex:MODEL` spells: split at commas, each at its first `:` (a
 * model may hold more). Names `field` and the entry when one is wrong, never its text.
 */
export const parseTargets = (
  text: string,
  field: string
): Either.Either<ReadonlyArray<Target>, InvalidInput> => {
  const entries = text.split(",").map((entry) => entry.trim())
  const targets: Array<{ provider: string; model: string }> = []
  for (const [index, entry] of entries.entries()) {
    const colon = entry.indexOf(":")
    if (colon <= 0 || colon === entry.length - 1)
      return Either.left(new InvalidInput({ field, reason: `entry ${index + 1} must be provider:model` }))
    targets.push({ provider: entry.slice(0, colon), model: entry.slice(colon + 1) })
  }
  return decodeTargets(targets, field)
}

const decodeTargetsEither = Schema.decodeUnknownEither(Targets, {
  errors: "first",
  onExcessProperty: "error"
})

/** Targets from outside, checked: the field and the entry (1-based) that is wrong. */
export const decodeTargets = (
  targets: unknown,
  field: string
): Either.Either<ReadonlyArray<Target>, InvalidInput> =>
  Either.mapLeft(decodeTargetsEither(targets), (error) => {
    // Schema counts entries from 0; people count them from 1.
    const reason = describeParseError(error).replace(/^(\d+)(\.|:)/, (_, index: string, sep: string) =>
      sep === "." ? `entry ${Number(index) + 1} ` : `entry ${Number(index) + 1}:`
    )
    return new InvalidInput({ field, reason })
  })

/** The fields a caller's errors are named after: `targets`/`payload` over MCP, the flags on the CLI. */
export interface BroadcastFields {
  readonly targets: string
  readonly payload: string
}

const exactly = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "first", onExcessProperty: "error" })
  return (payload: unknown): Either.Either<void, ParseResult.ParseError> =>
    Either.map(decode(payload), () => undefined)
}

/** The real providers' payload checks: exactly their keys, as `providers/payload.ts` decodes them. */
const [cliPayload, httpPayload] = ProviderPayload.members
const exactChecks: ReadonlyMap<string, (payload: unknown) => Either.Either<void, ParseResult.ParseError>> =
  new Map([
    ["claude", exactly(cliPayload)],
    ["codex", exactly(cliPayload)],
    ["ollama", exactly(httpPayload)],
    ["openai", exactly(httpPayload)]
  ])

/** A member to submit: its target and its whole payload. */
export interface Member {
  readonly target: Target
  readonly payload: JsonObject
}

/**
 * Each member's payload: the shared part with its target's provider and model, checked as a
 * worker would check it (a real provider's payload is exactly its keys), so that a broadcast
 * one member of which could never run is refused before anything is stored.
 */
export const memberPayloads = (
  targets: ReadonlyArray<Target>,
  shared: JsonObject,
  fields: BroadcastFields
): Either.Either<ReadonlyArray<Member>, InvalidInput> => {
  for (const key of ["provider", "model"])
    if (Object.hasOwn(shared, key))
      return Either.left(
        new InvalidInput({
          field: fields.payload,
          reason: `must not name ${key}: each target names its own provider and model`
        })
      )
  const members: Array<Member> = []
  for (const [index, target] of targets.entries()) {
    const payload: JsonObject = { ...shared, provider: target.provider, model: target.model }
    const entry = `entry ${index + 1} (${target.provider})`
    const reserved = checkSubmittable(payload, fields.targets)
    if (Either.isLeft(reserved))
      return Either.left(
        new InvalidInput({ field: fields.targets, reason: `${entry}: ${reserved.left.reason}` })
      )
    const check = exactChecks.get(target.provider)
    if (check !== undefined) {
      const decoded = check(payload)
      if (Either.isLeft(decoded)) {
        const reason = describeParseError(decoded.left)
        const field = reason.startsWith("model:") ? fields.targets : fields.payload
        return Either.left(new InvalidInput({ field, reason: `for ${entry}: ${reason}` }))
      }
    }
    members.push({ target, payload })
  }
  return Either.right(members)
}

/**
 * A member's request id, derived from its group's task id and its place (from 1): the same
 * group always queues the same members, so submitting it again is idempotent member by member.
 */
export const memberRequestId = (groupId: TaskId, index: number): ClientRequestId =>
  ClientRequestId.make(`${MemberRequestPrefix}${groupId}:${index + 1}`)

const MemberRequestIdPattern = new RegExp(`^${MemberRequestPrefix}([0-9a-f]{64}):[1-9][0-9]*$`)

/** The group task id a member's request id names; undefined for a request id of no member. */
export const groupOfMember = (clientRequestId: string): string | undefined =>
  MemberRequestIdPattern.exec(clientRequestId)?.[1]

/** The group record's payload: the targets and the shared part, under the reserved provider. */
export const GroupPayload = Schema.Struct({
  provider: Schema.Literal(BroadcastProvider),
  targets: Schema.Array(Target),
  payload: JsonObject
})
export type GroupPayload = typeof GroupPayload.Type
export const isGroupPayload = Schema.is(GroupPayload)

export const groupPayload = (targets: ReadonlyArray<Target>, shared: JsonObject): JsonObject => ({
  provider: BroadcastProvider,
  targets: targets.map((target) => ({ provider: target.provider, model: target.model })),
  payload: shared
})

/** One member's receipt, with the provider and model it was queued for. */
export const MemberReceipt = Schema.Struct({
  provider: TargetProvider,
  model: TargetModel,
  ...Receipt.fields
})
export type MemberReceipt = typeof MemberReceipt.Type

/** What a settled group record holds as its result: its members' receipts, in target order. */
export const GroupResult = Schema.Struct({ members: Schema.Array(MemberReceipt) })
export type GroupResult = typeof GroupResult.Type
const decodeGroupResult = Schema.decodeUnknownEither(GroupResult)

/** The member task ids a record's result lists, when it is a settled group's; none otherwise. */
export const membersListedBy = (record: { readonly result?: unknown }): ReadonlyArray<string> =>
  Either.match(decodeGroupResult(record.result), {
    onLeft: () => [],
    onRight: (decoded) => decoded.members.map((member) => member.task_id)
  })

/** The members a settled group record's result names; a result that does not decode is damage. */
export const groupMembersOf = (
  groupId: TaskId,
  result: unknown
): Either.Either<ReadonlyArray<MemberReceipt>, InvalidRecord> =>
  Either.mapBoth(decodeGroupResult(result), {
    onLeft: (error) =>
      new InvalidRecord({
        file: `task ${groupId}`,
        reason: `the broadcast group's result does not decode: ${describeParseError(error)}`
      }),
    onRight: (decoded) => decoded.members
  })

const { fields: receipt } = Receipt

/** What a broadcast returns once every member is durable. Identical for every resubmission. */
export const GroupReceipt = Schema.Struct({
  group_id: TaskIdSchema.annotations({
    description: "The group's id (the task id of its record): 64 lowercase hex characters"
  }),
  payload_sha256: receipt.payload_sha256.annotations({
    description:
      "The SHA-256 of the group record's payload; reading the group needs it with group_id, as reading a task needs its hash"
  }),
  created_at: receipt.created_at,
  members: Schema.Array(MemberReceipt).annotations({
    description: "Each member's receipt with its provider and model, in the order of the targets"
  })
})
export type GroupReceipt = typeof GroupReceipt.Type

/**
 * A group's state: `running` while any member is queued or running; `complete` when every
 * member completed; `failed` when every member finished and at least one failed or was cancelled.
 */
export const GroupState = Schema.Literal("running", "complete", "failed")
export type GroupState = typeof GroupState.Type

export const groupStateOf = (states: ReadonlyArray<TaskState>): GroupState =>
  states.some((state) => state === "queued" || state === "running")
    ? "running"
    : states.every((state) => state === "complete")
      ? "complete"
      : "failed"

const count = (state: TaskState) =>
  Integer({ minimum: 0 }).annotations({ description: `How many members are ${state}` })

/** How many members are in each task state. */
export const GroupCounts = Schema.Struct({
  queued: count("queued"),
  running: count("running"),
  complete: count("complete"),
  failed: count("failed"),
  cancelled: count("cancelled")
}).annotations({ description: "How many members are in each task state" })
export type GroupCounts = typeof GroupCounts.Type

export const countsOf = (states: ReadonlyArray<TaskState>): GroupCounts => {
  const counts = { queued: 0, running: 0, complete: 0, failed: 0, cancelled: 0 }
  for (const state of states) counts[state] += 1
  return counts
}

/** One member as `read` shows a task, with the provider and model it was queued for. */
export const MemberView = Schema.Struct({
  provider: TargetProvider,
  model: TargetModel,
  ...TaskViewSchema.fields
})
export type MemberView = typeof MemberView.Type

/** A group side by side: its receipt's fields, its state, and every member's task. */
export const GroupView = Schema.Struct({
  group_id: GroupReceipt.fields.group_id,
  client_request_id: TaskViewSchema.fields.client_request_id,
  payload_sha256: GroupReceipt.fields.payload_sha256,
  created_at: receipt.created_at,
  state: GroupState.annotations({
    description:
      "running while any member is queued or running; complete when every member completed; failed when every member finished and at least one failed or was cancelled"
  }),
  counts: GroupCounts,
  members: Schema.Array(MemberView).annotations({
    description: "Every member's state, result, error and attempts, in the order of the targets"
  })
})
export type GroupView = typeof GroupView.Type

/** The group view of a group record's receipt and its members as read now. */
export const groupViewOf = (
  group: { readonly task_id: TaskId; readonly client_request_id: ClientRequestId } & Receipt,
  members: ReadonlyArray<{ readonly member: MemberReceipt; readonly view: TaskView }>
): GroupView => {
  const states = members.map(({ view }) => view.state)
  return {
    group_id: group.task_id,
    client_request_id: group.client_request_id,
    payload_sha256: group.payload_sha256,
    created_at: group.created_at,
    state: groupStateOf(states),
    counts: countsOf(states),
    members: members.map(({ member, view }) => ({ provider: member.provider, model: member.model, ...view }))
  }
}

/** A task read as a group that is not one. */
export class NotAGroup extends Schema.TaggedError<NotAGroup>()("NotAGroup", {
  taskId: Schema.String
}) {
  override get message() {
    return `task ${this.taskId} is not a broadcast group; read it as a task`
  }
}

/**
 * A group whose record was never settled: its submitter stopped before every member was queued
 * (queued, or running under a submitter still at it), or the record was cancelled or failed.
 */
export class GroupUnsettled extends Schema.TaggedError<GroupUnsettled>()("GroupUnsettled", {
  groupId: Schema.String,
  state: Schema.String
}) {
  override get message() {
    return this.state === "queued" || this.state === "running"
      ? `group ${this.groupId} was never acknowledged (its record is ${this.state}): submit the same broadcast again to finish it`
      : `group ${this.groupId} was never acknowledged and cannot be now (its record is ${this.state}): submit the broadcast under a new client_request_id`
  }
}
