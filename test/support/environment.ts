/**
 * The environment of a spawned RelayKeep process: the test's own, minus every variable that
 * chooses a store or names the machine, so that a developer's shell (RELAYKEEP_STORE set to
 * their team's database, say) never leaks into a test. What a test passes in `extra` is kept.
 */
const Ambient = [
  "RELAYKEEP_ROOT",
  "XDG_DATA_HOME",
  "RELAYKEEP_STORE",
  "RELAYKEEP_PG_SCHEMA",
  "RELAYKEEP_QUEUE",
  "RELAYKEEP_PG_POOL",
  "RELAYKEEP_HOST"
]

export const spawnEnv = (extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of Ambient) delete env[name]
  return { ...env, ...extra }
}
