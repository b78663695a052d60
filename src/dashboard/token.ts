/**
 * The dashboard's capability token: 32 random bytes as 64 lowercase hex characters, in
 * `<data root>/dashboard.token` (mode 0600). Created on the first start, atomically and only
 * if absent (a temp file hard-linked into place), so two dashboards starting at once agree on
 * one token and a token is never overwritten.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect, Option } from "effect"
import { timingSafeEqual } from "node:crypto"
import { InvalidRecord } from "../domain/errors.js"
import { Host } from "../services/Host.js"
import { createComplete, ensureDirectory, fromUtf8, readIfExists, utf8 } from "../store/file/durable.js"
import { tempName } from "../store/file/layout.js"

export const TokenFileName = "dashboard.token"

const TokenPattern = /^[0-9a-f]{64}$/

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex")

/** The token of `root`, created when there is none yet. */
export const ensureToken = Effect.fn("Dashboard.ensureToken")(function* (root: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const host = yield* Host
  const file = path.join(root, TokenFileName)
  const existing = yield* readIfExists(fs, file)
  if (Option.isNone(existing)) {
    yield* ensureDirectory(fs, root)
    const token = hex(yield* host.randomBytes(32))
    const temp = tempName(host.pid, yield* host.token)
    // false: another dashboard created it meanwhile; theirs is read below.
    const created = yield* createComplete(fs, path, file, temp, utf8(`${token}\n`), { durable: true })
    if (created) return token
  }
  const text = fromUtf8(
    Option.isSome(existing) ? existing.value : Option.getOrElse(yield* readIfExists(fs, file), () => utf8(""))
  ).trim()
  if (!TokenPattern.test(text))
    return yield* new InvalidRecord({
      file,
      reason: "is not 64 lowercase hex characters; remove it and start the dashboard again for a new token"
    })
  return text
})

/** Whether `candidate` is the token, compared in constant time (for equal lengths). */
export const isToken = (token: string, candidate: string): boolean => {
  const expected = Buffer.from(token, "utf8")
  const given = Buffer.from(candidate, "utf8")
  return given.length === expected.length && timingSafeEqual(given, expected)
}
