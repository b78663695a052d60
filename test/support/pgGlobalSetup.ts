/**
 * Before any test: say once that the PostgreSQL suites are skipped when no server is named,
 * and fail at once when one is named but cannot be reached (a wrong URL must not pass as a skip).
 */
import pg from "pg"

export default async function setup(): Promise<void> {
  const url = process.env["RELAYKEEP_TEST_PG_URL"]
  if (url === undefined || url === "") {
    process.stderr.write(
      "PostgreSQL suites skipped: RELAYKEEP_TEST_PG_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/test)\n"
    )
    return
  }
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 })
  try {
    await client.connect()
    await client.query("SELECT 1")
  } catch (error) {
    throw new Error(
      `RELAYKEEP_TEST_PG_URL is set but PostgreSQL cannot be reached: ${error instanceof Error ? error.message : String(error)}`
    )
  } finally {
    await client.end().catch(() => undefined)
  }
}
