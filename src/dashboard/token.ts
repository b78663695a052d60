/**
 * The dashboard's capability token: 32 random bytes as 64 lowercase hex characters, in
 * `<data root>/dashboard.token` (mode 0600). Each start draws a new one and replaces the file
 * durably, so the URL of an earlier start stops working; `--keep-token` reuses the file's
 * instead (creating it, atomically and only if absent, when there is none). A running
 * dashboard holds its token in memory: a later start that replaces the file does not change
 * what an earlier, still running one accepts.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect, Option } from "effect"
import { timingSafeEqual } from "node:crypto"
import { InvalidRecord } from "../domain/errors.js"
import { Host } from "../services/Host.js"
import {
  createComplete,
  ensureDirectory,
  fromUtf8,
  readIfExists,
  tempName,
  utf8,
  writeDurable
} from "../platform/durable.js"
import { TokenFileName } from "../store/file/layout.js"
import { checkRoot } from "../platform/trust.js"

export { TokenFileName }

const TokenPattern = /^[0-9a-f]{64}$/

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex")

const draw = Effect.gen(function* () {
  const host = yield* Host
  return {
    token: hex(yield* host.randomBytes(32)),
    temp: tempName(host.pid, yield* host.token)
  }
})

/**
 * A new token for this start: written to a temp file (O_EXCL, 0600), fsynced and renamed over
 * the token file, whatever it held (a damaged file included), then the directory fsynced.
 */
export const freshToken = Effect.fn("Dashboard.freshToken")(function* (root: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  yield* ensureDirectory(fs, root)
  const { temp, token } = yield* draw
  yield* writeDurable(fs, path, path.join(root, TokenFileName), temp, utf8(`${token}\n`))
  return token
})

/**
 * The token of the file, created when there is none yet (`--keep-token`). Many starts at once
 * agree on one token: the file is linked into place only if absent, and never overwritten.
 */
export const keepToken = Effect.fn("Dashboard.keepToken")(function* (root: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const file = path.join(root, TokenFileName)
  const existing = yield* readIfExists(fs, file)
  if (Option.isNone(existing)) {
    yield* ensureDirectory(fs, root)
    const { temp, token } = yield* draw
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
      reason:
        "is not 64 lowercase hex characters; start the dashboard without --keep-token to replace it with a new token"
    })
  return text
})

/**
 * The token of this start: the file's with `keep`, else a new one. First the root must be one no
 * other user can write or own (trust.ts): they could read or replace the token there.
 */
export const startToken = (root: string, options: { readonly keep: boolean }) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const host = yield* Host
    yield* checkRoot({ fs, path, uid: host.uid }, root, { files: [path.join(root, TokenFileName)] })
    return yield* options.keep ? keepToken(root) : freshToken(root)
  })

/** Whether `candidate` is the token, compared in constant time (for equal lengths). */
export const isToken = (token: string, candidate: string): boolean => {
  const expected = Buffer.from(token, "utf8")
  const given = Buffer.from(candidate, "utf8")
  return given.length === expected.length && timingSafeEqual(given, expected)
}
