/**
 * The row limits of a memory file, at the limit and one past it: a row's text (1 MiB as UTF-8),
 * its source, the row as written (2 MiB), the number of rows, the file's size. Each refusal
 * names the line and the rule and never quotes the row.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import { MemoryLimits, utf8Length } from "../../src/domain/memory.js"
import { parseRows } from "../../src/store/memoryRows.js"

const bytesOf = (lines: ReadonlyArray<string>): Uint8Array =>
  new TextEncoder().encode(lines.map((line) => `${line}\n`).join(""))

const row = (fields: Record<string, unknown>) =>
  JSON.stringify({ id: "r", text: "t", source: "s", ...fields })

/** The rows, or the reason the file is refused. */
const parse = (lines: ReadonlyArray<string>) => parseRows(bytesOf(lines))

const refusal = (lines: ReadonlyArray<string>): string => {
  const parsed = parse(lines)
  if (Either.isRight(parsed)) return assert.fail("expected the file to be refused")
  return parsed.left
}

const accepted = (lines: ReadonlyArray<string>) => {
  const parsed = parse(lines)
  if (Either.isLeft(parsed)) return assert.fail(`refused: ${parsed.left}`)
  return parsed.right
}

const secret = "s3cr3t-row-content"
/** `text` of exactly `bytes` UTF-8 bytes, made of `unit` (1, 2, 3 or 4 bytes) and the secret. */
const textOf = (bytes: number, unit: string) => {
  const head = `${secret} `
  const size = utf8Length(unit)
  const body = unit.repeat(Math.floor((bytes - head.length) / size))
  return head + body + "x".repeat(bytes - head.length - utf8Length(body))
}

describe("memory rows at their limits", () => {
  for (const unit of ["a", "é", "€", "🙂"])
    it(`a text of exactly 1 MiB of UTF-8 is accepted, one byte more is refused (${unit})`, () => {
      const text = textOf(MemoryLimits.textBytes, unit)
      assert.strictEqual(new TextEncoder().encode(text).length, MemoryLimits.textBytes)
      const [parsed] = accepted([row({ text })])
      assert.strictEqual(parsed?.record.text, text)
      const reason = refusal([row({ id: "ok" }), row({ text: `${text}x` })])
      assert.strictEqual(reason, "line 2: text: must be at most 1,048,576 bytes (1 MiB) as UTF-8")
    })

  it("a row of exactly 2 MiB as written is accepted, one byte more is refused before it is parsed", () => {
    // Quotes are written escaped: 1 MiB of text that takes about 2 MiB to write.
    const text = textOf(MemoryLimits.textBytes - 40, '"')
    const line = (pad: number) => {
      const base = row({ text, source: "" })
      return row({ text, source: "p".repeat(MemoryLimits.rowBytes - utf8Length(base) + pad) })
    }
    assert.strictEqual(utf8Length(line(0)), MemoryLimits.rowBytes)
    assert.strictEqual(accepted([line(0)]).length, 1)
    assert.strictEqual(
      refusal(["", line(1)]),
      "line 2: is longer than 2,097,152 bytes (2 MiB), the limit of a row"
    )
    // Not even JSON: the size is checked first.
    assert.strictEqual(
      refusal([`{"id":${"9".repeat(MemoryLimits.rowBytes)}`]).slice(0, 22),
      "line 1: is longer than"
    )
  })

  it("a source of 1,024 characters is accepted, 1,025 refused", () => {
    assert.strictEqual(accepted([row({ source: "s".repeat(1024) })]).length, 1)
    assert.strictEqual(
      refusal([row({ source: `${secret}`.padEnd(1025, "s") })]),
      "line 1: source: must be at most 1,024 characters"
    )
  })

  it("250,000 rows are accepted (blank lines do not count), the 250,001st is refused naming its line", () => {
    const lines = Array.from(
      { length: MemoryLimits.storeRecords },
      (_, n) => `{"id":"${n}","text":"t","source":"s"}`
    )
    assert.strictEqual(accepted(["", ...lines, "  "]).length, MemoryLimits.storeRecords)
    assert.strictEqual(
      refusal(["", ...lines, '{"id":"x","text":"t","source":"s"}']),
      "line 250002: is past 250,000 records, the limit of a memory store"
    )
  })

  it("a file over 128 MiB is refused whole, without a line looked at", () => {
    assert.deepStrictEqual(
      parseRows(new Uint8Array(MemoryLimits.storeBytes + 1)),
      Either.left("is larger than 134,217,728 bytes (128 MiB), the limit of a memory store")
    )
  })

  it("bytes that are not UTF-8 are refused naming the line, never replaced", () => {
    const good = new TextEncoder().encode(`${row({})}\n`)
    const bad = new Uint8Array([
      ...good,
      ...new TextEncoder().encode('{"id":"b","text":"'),
      0xff,
      ...new TextEncoder().encode('","source":"s"}\n')
    ])
    assert.deepStrictEqual(parseRows(bad), Either.left("line 2: is not valid UTF-8"))
  })

  it("no refusal quotes the row", () => {
    const reasons = [
      refusal([row({ text: textOf(MemoryLimits.textBytes + 1, "a") })]),
      refusal([row({ source: secret.repeat(100) })]),
      refusal([row({ text: secret, tags: [secret.repeat(MemoryLimits.rowBytes / secret.length)] })]),
      refusal([`{"id":"${secret}",`])
    ]
    for (const reason of reasons) assert.notInclude(reason, secret)
  })
})
