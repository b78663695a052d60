/**
 * A synthetic memory store for the memory-search benchmark and its tests: notes about fictional
 * services, generated from a seed, so every run searches the same 100,000 records. Words follow
 * a skewed distribution (a few topics are everywhere, most service names are rare), as in real
 * notes, so that queries range from thousands of hits to none.
 */

/** A small, fast, seeded generator (mulberry32): the same seed, the same records. */
export const seeded = (seed: number) => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (below: number) => Math.floor(next() * below)
  /** Skewed towards the start of the list: item k is picked about k times less often than item 0. */
  const skewed = <A>(items: ReadonlyArray<A>): A =>
    items[Math.min(items.length, Math.floor((items.length + 1) ** next())) - 1] ?? pick(items)
  const pick = <A>(items: ReadonlyArray<A>): A => {
    const item = items[int(items.length)]
    if (item === undefined) throw new Error("pick from an empty list")
    return item
  }
  return { next, int, pick, skewed }
}

const Syllables = [
  "lu",
  "men",
  "or",
  "ka",
  "vex",
  "tri",
  "dan",
  "sol",
  "qui",
  "ra",
  "pel",
  "zen",
  "mo",
  "tor"
]
const Topics = [
  "deploy",
  "build",
  "tests",
  "cache",
  "search",
  "postgres",
  "on-call",
  "uploads",
  "billing",
  "auth",
  "metrics",
  "alerts",
  "backups",
  "migrations",
  "queue",
  "rate limits",
  "feature flags",
  "logging",
  "secrets rotation",
  "dashboards"
]
const Verbs = [
  "runs",
  "needs",
  "rebuilds",
  "expires",
  "rejects",
  "pages",
  "restarts",
  "checks",
  "retries",
  "drains"
]
const Things = [
  "the release build",
  "a local PostgreSQL",
  "two approvals",
  "the blob bucket",
  "the nightly job",
  "the primary replica",
  "the gateway",
  "the staging cluster",
  "a follow-up review",
  "the shared runner",
  "the cache warmer",
  "the audit trail"
]
const Docs = ["notes", "runbook", "architecture", "contributing", "incidents", "decisions"]
const Days = ["Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays"]

/** Service names: common ones first (two syllables), then a long tail (three). */
const serviceNames = (random: ReturnType<typeof seeded>): ReadonlyArray<string> => {
  const names = new Set<string>()
  while (names.size < 400) {
    const syllables = names.size < 40 ? 2 : 3
    const name = Array.from({ length: syllables }, () => random.pick(Syllables)).join("")
    names.add(name[0]?.toUpperCase() + name.slice(1))
  }
  return [...names]
}

const sentence = (random: ReturnType<typeof seeded>, service: string, topic: string): string => {
  switch (random.int(4)) {
    case 0:
      return `The ${topic} of ${service} ${random.pick(Verbs)} ${random.pick(Things)}.`
    case 1:
      return `${service} ${random.pick(Verbs)} ${random.pick(Things)} on ${random.pick(Days)} at ${String(random.int(24)).padStart(2, "0")}:00 UTC.`
    case 2:
      return `For ${topic}, ${service} keeps at most ${1 + random.int(500)} entries; older ones go after ${1 + random.int(60)} minutes.`
    default:
      return `If ${topic} fails in ${service}, check ${random.pick(Things)} first, then ${random.skewed(Topics)}.`
  }
}

/** The JSONL lines of `count` records, one per line, each a valid memory record. */
export const memoryLines = (count: number, seed = 7): ReadonlyArray<string> => {
  const random = seeded(seed)
  const services = serviceNames(random)
  const lines: Array<string> = []
  for (let n = 1; n <= count; n++) {
    const service = random.skewed(services)
    const topics = Array.from({ length: 1 + random.int(3) }, () => random.skewed(Topics))
    const text = topics.map((topic) => sentence(random, service, topic)).join(" ")
    const day = new Date(Date.UTC(2026, 0, 1) + random.int(300) * 86_400_000).toISOString()
    lines.push(
      JSON.stringify({
        id: `mem-${String(n).padStart(6, "0")}`,
        text,
        source: `synthetic/${service.toLowerCase()}-${random.pick(Docs)}.md`,
        tags: [...new Set(topics)],
        created_at: day
      })
    )
  }
  return lines
}

/**
 * Queries as people type them: one to three words, common topics and rare names, a few
 * substrings and times, mixed case, and some that match nothing.
 */
export const memoryQueries: ReadonlyArray<string> = [
  "deploy",
  "postgres",
  "Lulu deploy",
  "cache expires",
  "on-call pages",
  "backups nightly job",
  "rate limits gateway",
  "feature flags",
  "secrets rotation",
  "Quitrizen",
  "staging cluster restarts",
  "Tuesdays",
  "10:00 UTC",
  "audit trail",
  "migrations primary replica",
  "billing",
  "no such thing",
  "kubernetes",
  "blob bucket uploads",
  "dashboards",
  "MEN",
  "release build",
  "tests local PostgreSQL",
  "keeps at most 250 entries",
  "follow-up review"
]
