/**
 * `npm run bench:profile [-- SYSTEM…] [--phase enqueue|process] [--cpuprofile FILE]`: one phase of
 * pg-throughput (2,000 jobs, concurrency 10; by default the process phase) under V8's sampling
 * profiler, in this process, for RelayKeep and its peers (relaykeep, pgboss, graphile; by default
 * relaykeep and the peer its target names for that phase): the CPU each spent per job, the
 * statements each sent per job, and where the CPU went, by origin (our source, Effect, the pg
 * driver, Node, the kernel calls Node makes) and by function (self time). What bench/methods.md
 * says of pg-throughput's remaining gap comes from this. `--cpuprofile FILE` also writes the raw
 * profile of the last system profiled, which Chrome's DevTools open.
 */
import { writeFileSync } from "node:fs"
import type { Profiler } from "node:inspector"
import inspector from "node:inspector/promises"
import path from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import type { PhaseHooks, Phases } from "./benchmarks/pgThroughput.js"
import { graphile, Jobs, pgboss, relaykeep } from "./benchmarks/pgThroughput.js"
import { benchPgUrl } from "./postgres.js"

type Profile = Profiler.Profile
type ProfileNode = Profiler.ProfileNode

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

/** Where a frame's code comes from, coarsely. */
const originOf = (url: string, functionName: string): string => {
  if (url === "")
    return functionName === "(garbage collector)" ? "garbage collection" : `(${functionName || "native"})`
  if (url.startsWith("node:")) return "node"
  const packages = url.split("/node_modules/")
  if (packages.length > 1) {
    const rest = packages[packages.length - 1] ?? ""
    const parts = rest.split("/")
    return rest.startsWith("@") ? `${parts[0]}/${parts[1]}` : (parts[0] ?? rest)
  }
  return url.includes(`${repo}/src/`) ? "relaykeep src" : url.includes(`${repo}/bench/`) ? "bench" : url
}

const frameName = (node: ProfileNode): string => {
  const { functionName, url, lineNumber } = node.callFrame
  const where =
    url === ""
      ? ""
      : ` ${url.replace(`file://${repo}/`, "").replace(/^.*\/node_modules\//, "")}:${lineNumber + 1}`
  return `${functionName || "(anonymous)"}${where}`
}

const top = (totals: Map<string, number>, all: number, count: number) =>
  [...totals]
    .sort(([, a], [, b]) => b - a)
    .slice(0, count)
    .map(
      ([name, micros]) =>
        `${((100 * micros) / all).toFixed(1).padStart(5)}%  ${(micros / 1000).toFixed(0).padStart(6)} ms  ${name}`
    )

/** The statements the driver sends, by their first words, while a phase is profiled. */
const statements = new Map<string, number>()
let counting: pg.Client | undefined
const query = pg.Client.prototype.query
const headOf = (text: unknown): string =>
  typeof text === "string"
    ? text
        .replace(/\s+/g, " ")
        .replace(/"bench_[a-z]+_[0-9a-f]+"/g, "<schema>")
        .trim()
        .slice(0, 70)
    : typeof text === "object" && text !== null && "text" in text && typeof text.text === "string"
      ? headOf(text.text)
      : "(other)"
// Counted in the driver itself: every statement of every pool goes through Client.query.
Reflect.set(pg.Client.prototype, "query", function (this: pg.Client, ...args: ReadonlyArray<unknown>) {
  // Every client but the benchmark's own probe, which asks whether the jobs are done.
  if (counting !== undefined && counting !== this) {
    const head = headOf(args[0])
    statements.set(head, (statements.get(head) ?? 0) + 1)
  }
  return Reflect.apply(query, this, args)
})

const systems = { relaykeep, pgboss, graphile } as const
type System = keyof typeof systems
const isSystem = (name: string): name is System => name in systems
type Phase = "enqueue" | "process"
/** The peer each phase's target is measured against (the faster of the two in our runs). */
const peerOf: Record<Phase, System> = { enqueue: "pgboss", process: "graphile" }

const profileOf = async (
  system: System,
  phaseName: Phase,
  probe: pg.Client
): Promise<{ readonly phases: Phases; readonly profile: Profile; readonly cpuMicros: number }> => {
  const phase = systems[system]
  // One run unprofiled, so that the profile shows the steady state rather than the first
  // compilation of every module.
  await phase(100, probe)
  statements.clear()
  const session = new inspector.Session()
  session.connect()
  await session.post("Profiler.enable")
  await session.post("Profiler.setSamplingInterval", { interval: 200 })
  let cpuBefore = process.cpuUsage()
  let cpuMicros = 0
  let stopped: { readonly profile: Profile } | undefined
  const start = async () => {
    await session.post("Profiler.start")
    counting = probe
    cpuBefore = process.cpuUsage()
  }
  const stop = async () => {
    const cpu = process.cpuUsage(cpuBefore)
    cpuMicros = cpu.user + cpu.system
    counting = undefined
    stopped = await session.post("Profiler.stop")
  }
  const hooks: PhaseHooks =
    phaseName === "enqueue"
      ? { beforeEnqueue: start, afterEnqueue: stop }
      : { beforeProcess: start, afterProcess: stop }
  const phases = await phase(101, probe, hooks)
  session.disconnect()
  if (stopped === undefined) throw new Error(`the ${phaseName} phase of ${system} did not run`)
  return { phases, profile: stopped.profile, cpuMicros }
}

const report = (system: System, phaseName: Phase, phases: Phases, profile: Profile, cpuMicros: number) => {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const byFunction = new Map<string, number>()
  const byOrigin = new Map<string, number>()
  let all = 0
  const deltas = profile.timeDeltas ?? []
  ;(profile.samples ?? []).forEach((id, index) => {
    const node = byId.get(id)
    const micros = deltas[index] ?? 0
    if (node === undefined) return
    all += micros
    if (node.callFrame.functionName === "(idle)") return
    const name = frameName(node)
    byFunction.set(name, (byFunction.get(name) ?? 0) + micros)
    const origin = originOf(node.callFrame.url, node.callFrame.functionName)
    byOrigin.set(origin, (byOrigin.get(origin) ?? 0) + micros)
  })
  const busy = [...byOrigin.values()].reduce((a, b) => a + b, 0)
  const sent = [...statements.values()].reduce((a, b) => a + b, 0)
  console.log(`\n## ${system}: ${phaseName} ${phases[phaseName].toFixed(0)} jobs/s`)
  console.log(
    `${(all / 1000).toFixed(0)} ms of wall time, ${(cpuMicros / 1000).toFixed(0)} ms of CPU (${(cpuMicros / Jobs).toFixed(0)} µs a job), idle ${((100 * (all - busy)) / all).toFixed(1)}%; ${sent} statements (${(sent / Jobs).toFixed(2)} a job)`
  )
  console.log("\nstatements:")
  for (const [head, n] of [...statements].sort(([, a], [, b]) => b - a).slice(0, 12))
    console.log(`${String(n).padStart(7)}  ${head}`)
  console.log("\nby origin (self time, share of wall time):")
  for (const line of top(byOrigin, all, 12)) console.log(line)
  console.log("\nby function (self time):")
  for (const line of top(byFunction, all, 30)) console.log(line)
}

const main = async () => {
  const args = process.argv.slice(2)
  const valueOf = (flag: string) => {
    const at = args.indexOf(flag)
    return at >= 0 ? args[at + 1] : undefined
  }
  const rawFile = valueOf("--cpuprofile")
  const phaseArg = valueOf("--phase") ?? "process"
  if (phaseArg !== "enqueue" && phaseArg !== "process")
    throw new Error(`--phase ${phaseArg}: enqueue or process`)
  const phaseName: Phase = phaseArg
  const named = args.filter((arg, index) => !arg.startsWith("-") && !(args[index - 1] ?? "").startsWith("--"))
  const chosen: ReadonlyArray<string> = named.length === 0 ? ["relaykeep", peerOf[phaseName]] : named
  const probe = new pg.Client({ connectionString: benchPgUrl })
  await probe.connect()
  try {
    for (const system of chosen) {
      if (!isSystem(system)) throw new Error(`no system ${system}: ${Object.keys(systems).join(", ")}`)
      const { phases, profile, cpuMicros } = await profileOf(system, phaseName, probe)
      report(system, phaseName, phases, profile, cpuMicros)
      if (rawFile !== undefined) writeFileSync(rawFile, JSON.stringify(profile))
    }
  } finally {
    await probe.end()
  }
}

await main()
