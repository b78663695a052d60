/**
 * Which processes belong to an attempt (a pure function of the process table), and the order in
 * which a stop signals them, against a scripted process table. The real process table is used by
 * test/providers/escapes.test.ts and test/worker/reapProcesses.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import type { ProcessEntry } from "../../src/services/Host.js"
import { Host } from "../../src/services/Host.js"
import { attemptMembers, stopProcessTree } from "../../src/services/ProcessTree.js"

const self = 50
const entry = (pid: number, pgid: number, sid: number, carriesMarker = false): ProcessEntry => ({
  pid,
  pgid,
  sid,
  carriesMarker
})

/** The worker (50, in its own session 40), a provider 100 and what it started, and a stranger. */
const table: ReadonlyArray<ProcessEntry> = [
  entry(self, 40, 40),
  entry(100, 100, 100, true), // the provider, leader of its group and session
  entry(101, 100, 100), // a tool in its group
  entry(102, 102, 100), // an MCP server: own group, same session, stripped environment
  entry(200, 199, 199, true), // a setsid escapee that kept the environment
  entry(201, 200, 199), // a child of the escapee in a group it leads
  entry(300, 300, 300) // somebody else's
]

describe("attemptMembers: which processes are the attempt's", () => {
  it("for the worker that started the leader: its group, its session, every marker carrier and what they lead", () => {
    const found = attemptMembers(table, new Set([100]), 100, self)
    assert.sameMembers([...found.pids], [100, 101, 102, 200, 201])
  })

  it("without a marker (the doctor's probe): the leader's group and session only", () => {
    const unmarked = table.map((process) => ({ ...process, carriesMarker: false }))
    assert.sameMembers([...attemptMembers(unmarked, new Set([100]), 100, self).pids], [100, 101, 102])
  })

  it("for a reaper: the recorded group and session only once a marker carrier is seen in them", () => {
    const found = attemptMembers(table, new Set(), 100, self)
    assert.sameMembers([...found.pids], [100, 101, 102, 200, 201])
    assert.isTrue(found.proven.has(100))
    // The provider exited: its session's unmarked members prove nothing (the pid may be reused).
    const exited = table.filter((process) => process.pid !== 100)
    assert.sameMembers([...attemptMembers(exited, new Set(), 100, self).pids], [200, 201])
  })

  it("proof is kept across looks: once the carriers are gone, the members they proved are still reached", () => {
    const first = attemptMembers(table, new Set(), 100, self)
    const afterTerm = [entry(102, 102, 100), entry(201, 200, 199), entry(300, 300, 300)]
    assert.sameMembers([...attemptMembers(afterTerm, first.proven, 100, self).pids], [102, 201])
  })

  it("never the worker itself, even when it carries the marker", () => {
    const marked = [entry(self, 100, 100, true), entry(101, 100, 100)]
    assert.deepStrictEqual(attemptMembers(marked, new Set(), 100, self).pids, [])
  })
})

interface Scripted {
  readonly pid: number
  readonly pgid: number
  readonly sid: number
  /** Ignores SIGTERM; only SIGKILL ends it. */
  readonly stubborn?: boolean
  /** Cannot be signalled (another user's). */
  readonly foreign?: boolean
  /** Started by its parent when the parent gets SIGTERM. */
  readonly spawnsOnTerm?: Scripted
}

/** A Host whose process table is `initial` as it changes under the signals sent; the signals, in order. */
const scriptedHost = (initial: ReadonlyArray<Scripted>, withProc = true) => {
  const running = new Map(initial.map((process) => [process.pid, process]))
  const sent: Array<string> = []
  const layer = Layer.succeed(
    Host,
    Host.of({
      pid: self,
      uid: undefined,
      hostname: "test-host",
      bootId: "test-boot",
      isAlive: (pid) => Effect.succeed(running.has(pid)),
      token: Effect.succeed("token"),
      randomBytes: (size) => Effect.succeed(new Uint8Array(size)),
      environment: {},
      signalGroup: (pgid, signal) =>
        Effect.sync(() => {
          sent.push(`${signal} -${pgid}`)
          const members = [...running.values()].filter((process) => process.pgid === pgid)
          for (const member of members) running.delete(member.pid)
          return members.length > 0
        }),
      groupAlive: (pgid) => Effect.sync(() => [...running.values()].some((process) => process.pgid === pgid)),
      signal: (pid, signal) =>
        Effect.sync(() => {
          const process = running.get(pid)
          if (process === undefined || process.foreign === true) return false
          sent.push(`${signal} ${pid}`)
          if (signal === "SIGTERM" && process.spawnsOnTerm !== undefined)
            running.set(process.spawnsOnTerm.pid, process.spawnsOnTerm)
          if (signal === "SIGKILL" || process.stubborn !== true) running.delete(pid)
          return true
        }),
      processTable: (marker) =>
        Effect.sync(() =>
          withProc
            ? Option.some(
                [...running.values()].map((process) =>
                  entry(
                    process.pid,
                    process.pgid,
                    process.sid,
                    Object.keys(marker).length > 0 && process.pid === 100
                  )
                )
              )
            : Option.none()
        )
    })
  )
  return { layer, sent, running }
}

describe("stopProcessTree: SIGTERM to each, SIGKILL to what is left", () => {
  it.live(
    "SIGTERM once each, SIGKILL after the grace to the stubborn, a descendant started meanwhile reached too",
    () => {
      const host = scriptedHost([
        { pid: 100, pgid: 100, sid: 100, spawnsOnTerm: { pid: 103, pgid: 103, sid: 100, stubborn: true } },
        { pid: 102, pgid: 102, sid: 100, stubborn: true },
        { pid: 300, pgid: 300, sid: 300 }
      ])
      return Effect.gen(function* () {
        const stopped = yield* stopProcessTree({ leader: 100, marker: { M: "1" }, leaderKnown: true }, 200)
        assert.sameMembers([...stopped], [100, 102, 103])
        assert.deepStrictEqual(host.sent, [
          "SIGTERM 100",
          "SIGTERM 102",
          // Born of the first SIGTERM, found by the next look.
          "SIGTERM 103",
          "SIGKILL 102",
          "SIGKILL 103"
        ])
        assert.deepStrictEqual([...host.running.keys()], [300], "a stranger is left alone")
      }).pipe(Effect.provide(host.layer))
    }
  )

  it.live("a process that cannot be signalled is not waited for", () => {
    const host = scriptedHost([
      { pid: 100, pgid: 100, sid: 100 },
      { pid: 104, pgid: 100, sid: 100, foreign: true }
    ])
    return Effect.gen(function* () {
      const stopped = yield* stopProcessTree({ leader: 100, marker: undefined, leaderKnown: true }, 60_000)
      assert.deepStrictEqual(stopped, [100])
      assert.deepStrictEqual(host.sent, ["SIGTERM 100"])
    }).pipe(Effect.provide(host.layer))
  })

  it.live(
    "without /proc: the worker signals the leader's group; a reaper, which cannot prove it, nothing",
    () => {
      const live = scriptedHost([{ pid: 100, pgid: 100, sid: 100 }], false)
      const reaper = scriptedHost([{ pid: 100, pgid: 100, sid: 100 }], false)
      return Effect.gen(function* () {
        const stopped = yield* stopProcessTree(
          { leader: 100, marker: { M: "1" }, leaderKnown: true },
          200
        ).pipe(Effect.provide(live.layer))
        assert.deepStrictEqual(stopped, [100])
        assert.deepStrictEqual(live.sent, ["SIGTERM -100"])
        const none = yield* stopProcessTree(
          { leader: 100, marker: { M: "1" }, leaderKnown: false },
          200
        ).pipe(Effect.provide(reaper.layer))
        assert.deepStrictEqual(none, [])
        assert.deepStrictEqual(reaper.sent, [])
      })
    }
  )
})
