/**
 * A data root is trusted only when no other user can change it: the root, its layout and its
 * configuration files belong to this user and are writable by nobody else, and the directories
 * above it cannot be used to replace it. Refusals name the path and the command that fixes it,
 * and never change a mode. (The same checks against a real second user: test/e2e/neighbours.test.ts.)
 */
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { ClientRequestId } from "../../src/domain/ids.js"
import { AuditLog } from "../../src/services/AuditLog.js"
import { auditLogLayer } from "../../src/mcp/auditLayer.js"
import { Host } from "../../src/services/Host.js"
import { Lock } from "../../src/services/Lock.js"
import { fileStoreAt, buildService } from "../support/stores.js"
import { useTempDirs } from "../support/files.js"

const tempDir = useTempDirs()

const mode = (file: string) => fs.statSync(file).mode & 0o7777

/** A fresh root made and opened by this user. */
const openedRoot = Effect.gen(function* () {
  const root = path.join(tempDir(), "root")
  yield* fileStoreAt(root)
  return root
})

const refusalOf = (root: string, host: Parameters<typeof Host.layerTest>[0] = {}) =>
  Effect.flip(fileStoreAt(root, host))

describe("trusting a data root", () => {
  it.scoped("a new root and its layout are created private, and open again", () =>
    Effect.gen(function* () {
      const root = yield* openedRoot
      assert.strictEqual(mode(root), 0o700)
      assert.strictEqual(mode(path.join(root, "tasks")), 0o700)
      assert.strictEqual(mode(path.join(root, "secret")), 0o600)
      yield* fileStoreAt(root)
    })
  )

  for (const [name, bits] of [
    ["world-writable", 0o777],
    ["group-writable", 0o770]
  ] as const)
    it.scoped(`a ${name} root is refused with the chmod that fixes it, and its mode is left alone`, () =>
      Effect.gen(function* () {
        const root = yield* openedRoot
        fs.chmodSync(root, bits)
        const error = yield* refusalOf(root)
        assert.strictEqual(error._tag, "StorageError")
        assert.include(error.message, `chmod 700 ${root}`)
        assert.include(error.message, `mode 0${bits.toString(8)}`)
        assert.strictEqual(mode(root), bits)
        fs.chmodSync(root, 0o700)
        yield* fileStoreAt(root)
      })
    )

  for (const dir of ["tasks", "index", path.join("index", "queued"), "locks", "audit"])
    it.scoped(`a writable ${dir} directory inside a private root is refused`, () =>
      Effect.gen(function* () {
        const root = yield* openedRoot
        const target = path.join(root, dir)
        fs.mkdirSync(target, { recursive: true, mode: 0o700 })
        fs.chmodSync(target, 0o733)
        const error = yield* refusalOf(root)
        assert.include(error.message, `chmod 700 ${target}`)
        assert.strictEqual(mode(target), 0o733)
      })
    )

  for (const file of ["secret", "config.json", "dashboard.token"])
    it.scoped(`a writable ${file} is refused with chmod 600`, () =>
      Effect.gen(function* () {
        const root = yield* openedRoot
        const target = path.join(root, file)
        if (!fs.existsSync(target)) fs.writeFileSync(target, "{}\n", { mode: 0o600 })
        fs.chmodSync(target, 0o622)
        const error = yield* refusalOf(root)
        assert.include(error.message, `chmod 600 ${target}`)
      })
    )

  it.scoped("a root owned by another user is refused, naming both uids", () =>
    Effect.gen(function* () {
      const root = yield* openedRoot
      const error = yield* refusalOf(root, { uid: 54_321 })
      assert.include(error.message, "not by this user (uid 54321)")
      assert.include(error.message, `chown 54321 ${root}`)
    })
  )

  it.scoped("a root under a directory others can write without the sticky bit is refused", () =>
    Effect.gen(function* () {
      const shared = path.join(tempDir(), "shared")
      fs.mkdirSync(shared, { mode: 0o700 })
      fs.chmodSync(shared, 0o777)
      const root = path.join(shared, "root")
      // Neither created there nor used once it exists.
      assert.include((yield* refusalOf(root)).message, `chmod go-w ${shared}`)
      assert.isFalse(fs.existsSync(root))
      fs.mkdirSync(root, { mode: 0o700 })
      assert.include((yield* refusalOf(root)).message, `chmod go-w ${shared}`)
      // With the sticky bit (as /tmp has) nobody else can rename the root away: accepted.
      fs.chmodSync(shared, 0o1777)
      yield* fileStoreAt(root)
    })
  )

  it.scoped("a symlinked root is checked where it really is", () =>
    Effect.gen(function* () {
      const real = yield* openedRoot
      const link = path.join(tempDir(), "link")
      fs.symlinkSync(real, link)
      yield* fileStoreAt(link)
      fs.chmodSync(real, 0o777)
      const error = yield* refusalOf(link)
      assert.include(error.message, `chmod 700 ${real}`)
    })
  )

  it.scoped("a file where the layout keeps a directory is refused", () =>
    Effect.gen(function* () {
      const root = yield* openedRoot
      fs.rmSync(path.join(root, "locks"), { recursive: true })
      fs.writeFileSync(path.join(root, "locks"), "")
      const error = yield* refusalOf(root)
      assert.include(error.message, "is a file, where RelayKeep keeps a directory")
    })
  )

  it.scoped("the audit log refuses a directory others can write", () =>
    Effect.gen(function* () {
      const dir = path.join(tempDir(), "audit")
      fs.mkdirSync(dir, { mode: 0o700 })
      fs.chmodSync(dir, 0o777)
      const layer = auditLogLayer(dir).pipe(
        Layer.provide(Lock.layerMemory),
        Layer.provide(Host.layerTest({})),
        Layer.provide(nodeContextLayer)
      )
      const error = yield* Effect.flip(buildService(AuditLog, layer))
      assert.include(error.message, `chmod 700 ${dir}`)
    })
  )
})

describe("records planted in a root", () => {
  it.scoped("a record whose task id was not made with this root's secret is damaged, never dispatched", () =>
    Effect.gen(function* () {
      const root = yield* openedRoot
      // A well-formed record copied from another root: every field agrees, except that its task id
      // is the keyed hash of its request id under that root's secret, not under this one's.
      const other = path.join(tempDir(), "other")
      const donor = yield* fileStoreAt(other)
      const receipt = yield* donor.submit({
        clientRequestId: ClientRequestId.make("planted"),
        payload: { provider: "echo", prompt: "run me" }
      })
      const planted = path.join(root, "tasks", `${receipt.task_id}.json`)
      fs.copyFileSync(path.join(other, "tasks", `${receipt.task_id}.json`), planted)
      const marker = fs.readdirSync(path.join(other, "index", "queued"))[0] ?? "missing"
      fs.writeFileSync(path.join(root, "index", "queued", marker), "")

      const store = yield* fileStoreAt(root)
      const live = yield* store.live
      assert.deepStrictEqual(live.queued, [])
      assert.deepStrictEqual(
        live.invalid.map((report) => report.file),
        [planted]
      )
      assert.include(live.invalid[0]?.reason ?? "", "not the keyed hash of client_request_id")
      const read = yield* Effect.either(store.read(receipt.task_id, receipt.payload_sha256))
      assert.isTrue(Either.isLeft(read) && read.left._tag === "InvalidRecord")
      const check = yield* store.check
      assert.deepStrictEqual(
        check.invalid_records.map((report) => report.file),
        [planted]
      )
    })
  )
})

describe("symbolic links planted in a root", () => {
  it.scoped("an index marker planted as a link is never written through", () =>
    Effect.gen(function* () {
      const root = yield* openedRoot
      const store = yield* fileStoreAt(root)
      const target = path.join(tempDir(), "victim")
      const receipt = yield* store.submit({
        clientRequestId: ClientRequestId.make("linked"),
        payload: { provider: "echo", prompt: "p" }
      })
      // The running marker's name is known from the task id: plant it before the claim makes it.
      fs.symlinkSync(target, path.join(root, "index", "running", receipt.task_id))
      const claimed = yield* store.claim(receipt.task_id, { workerId: "w", leaseMillis: 60_000 })
      assert.isTrue(Option.isSome(claimed))
      assert.isFalse(fs.existsSync(target))
    })
  )
})
