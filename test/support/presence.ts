/** Worker registry entries for tests. */
import { isoTime } from "../../src/domain/time.js"
import type { WorkerPresence } from "../../src/domain/worker.js"
import { Version } from "../../src/version.js"

/**
 * The entry of run `digit` × 32 of `workerId` on host "box", last seen at `seenAt` (epoch ms) and
 * late 15 s later (three 5 s heartbeats).
 */
export const presenceAt = (
  digit: string,
  workerId: string,
  seenAt: number,
  overrides: Partial<WorkerPresence> = {}
): WorkerPresence => ({
  instance: digit.repeat(32),
  worker_id: workerId,
  hostname: "box",
  pid: 100,
  version: Version,
  status: "watching",
  started_at: isoTime(0),
  seen_at: isoTime(seenAt),
  expires_at: isoTime(seenAt + 15_000),
  concurrency: 2,
  running: 0,
  ...overrides
})
