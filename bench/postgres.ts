/** The PostgreSQL the PostgreSQL benchmarks use: RELAYKEEP_BENCH_PG_URL, else the local test database. */
import pg from "pg"

export const benchPgUrl = process.env["RELAYKEEP_BENCH_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"

/** The server's version, or null when it cannot be reached. */
export const postgresVersion = async (): Promise<string | null> => {
  const client = new pg.Client({ connectionString: benchPgUrl, connectionTimeoutMillis: 5_000 })
  try {
    await client.connect()
    const result = await client.query<{ version: string }>(
      "SELECT current_setting('server_version') AS version"
    )
    return result.rows[0]?.version ?? null
  } catch {
    return null
  } finally {
    await client.end().catch(() => undefined)
  }
}

/** Run statements on a connection of its own. */
export const withPg = async <A>(work: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: benchPgUrl })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}
