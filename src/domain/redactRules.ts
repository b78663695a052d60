/**
 * Which names hold secrets: the rule set of redaction, as data (SECURITY.md prints the same
 * table, and a test checks that it does).
 *
 * A name (a key, a header name, the name half of `name=value` in text) is normalised first:
 * NFKC, which folds full-width and other compatibility forms (`ＰＡＳＳＷＯＲＤ` is `PASSWORD`),
 * then cut into lower-case segments of letters at every other character (`_`, `-`, `.`,
 * spaces, digits, zero-width characters…) and at camelCase boundaries. `dbPassword`,
 * `DB-PASSWORD`, `db.password` and `DB_PASSWORD_2` are all `db` + `password`; `XApiKey` is
 * `x` + `api` + `key`.
 *
 * A name is sensitive when one of its segments is one of `Words` (so `key` and `api_key` are,
 * `monkey` and `keyboard` are not), or when its segments written together contain one of
 * `Phrases` or `Fragments` (so `PRIVATEKEY`, `database_url` and `refreshTokens` are).
 *
 * Two of those words are also everyday names of things that are not secrets: a count of
 * tokens (`max_tokens`, `input_tokens`, `token_count`) and a key that orders or identifies
 * (`sort_key`, `key_count`). `Quantities` lists, for each, the segments that say so when
 * written right beside it; such a segment is then not a secret by itself (`max_tokens` keeps
 * its value, `refresh_tokens` and `max_auth_token` do not). `BenignNames` are whole names let
 * go as they are (`tokens`, the usual count). A lone `key` or `token` stays a secret.
 */

/** Segments that are secrets by themselves, matched whole. */
export const Words: ReadonlyArray<string> = [
  "auth",
  "csrf",
  "cvc",
  "cvv",
  "dsn",
  "hotp",
  "jwe",
  "jws",
  "jwt",
  "key",
  "keys",
  "mnemonic",
  "oauth",
  "otp",
  "pass",
  "passcode",
  "pat",
  "pin",
  "privkey",
  "pw",
  "pwd",
  "session",
  "sid",
  "signature",
  "sk",
  "totp",
  "xsrf"
]

/**
 * Segment sequences that are secrets together, matched with or without separators between
 * them (`database_url`, `DatabaseURL`, `DATABASEURL`). The ones ending in `key` are also caught
 * by the word `key` when written apart; they are here for the run-together forms.
 */
export const Phrases: ReadonlyArray<ReadonlyArray<string>> = [
  ["access", "key"],
  ["api", "key"],
  ["backup", "code"],
  ["client", "key"],
  ["conn", "str"],
  ["connection", "string"],
  ["connection", "uri"],
  ["connection", "url"],
  ["database", "uri"],
  ["database", "url"],
  ["db", "uri"],
  ["db", "url"],
  ["encryption", "key"],
  ["github", "pat"],
  ["master", "key"],
  ["private", "key"],
  ["recovery", "code"],
  ["recovery", "phrase"],
  ["seed", "phrase"],
  ["seed", "words"],
  ["session", "id"],
  ["signing", "key"],
  ["ssh", "key"]
]

/** Letters that are secrets wherever they appear in the name, even inside a longer word. */
export const Fragments: ReadonlyArray<string> = [
  "apikey",
  "authorization",
  "bearer",
  "cookie",
  "credential",
  "passphrase",
  "passwd",
  "password",
  "secret",
  "token"
]

/**
 * Segments that are no secret when one of `beside` is written right before or after them:
 * `max_tokens`, `tokens_used`, `sort_key`, `key_count`. Only whole segments: `maxtokens` run
 * together is still caught by the fragment `token`.
 */
export const Quantities: ReadonlyArray<{
  readonly segments: ReadonlyArray<string>
  readonly beside: ReadonlyArray<string>
}> = [
  {
    segments: ["token", "tokens"],
    beside: [
      "budget",
      "cached",
      "completion",
      "count",
      "counts",
      "input",
      "limit",
      "max",
      "min",
      "num",
      "output",
      "prompt",
      "reasoning",
      "remaining",
      "total",
      "used"
    ]
  },
  {
    segments: ["key", "keys"],
    beside: ["count", "counts", "foreign", "idempotency", "partition", "primary", "sort"]
  }
]

/** Whole names that are no secret, though a rule would match them: `tokens` is a count. */
export const BenignNames: ReadonlyArray<string> = ["tokens"]

const WordSet: ReadonlySet<string> = new Set(Words)
const BenignSet: ReadonlySet<string> = new Set(BenignNames)
const Joined: ReadonlyArray<string> = [...Phrases.map((phrase) => phrase.join("")), ...Fragments]

/**
 * The lower-case segments of a name: NFKC, split at camelCase boundaries (`dbPassword`,
 * `APIKey`), then at every character that is not a letter.
 */
export const nameSegments = (name: string): ReadonlyArray<string> =>
  name
    .normalize("NFKC")
    .replace(/(\p{Ll})(\p{Lu})/gu, "$1 $2")
    .replace(/(\p{Lu})(\p{Lu}\p{Ll})/gu, "$1 $2")
    .toLowerCase()
    .split(/[^\p{L}]+/u)
    .filter((segment) => segment !== "")

/** Longer names are not names: a 10 KB key is judged by its first 256 characters. */
const MaxNameChars = 256

/** Every rule needs one of these letters in the name: most names are let go without being split. */
const Needles: ReadonlyArray<string> = [
  ...new Set([...Words, ...Phrases.map(([first]) => first ?? ""), ...Fragments])
]
const Printable = /^[\x20-\x7e]*$/

/** Whether the segment at `index` counts or orders something (`Quantities`), by its neighbours. */
const quantityAt = (segments: ReadonlyArray<string>, index: number): boolean => {
  const segment = segments[index] ?? ""
  const neighbours = [segments[index - 1], segments[index + 1]]
  return Quantities.some(
    (rule) =>
      rule.segments.includes(segment) &&
      neighbours.some((neighbour) => neighbour !== undefined && rule.beside.includes(neighbour))
  )
}

/** Whether values under this name are secrets, by the rules above. */
export const isSensitiveName = (name: string): boolean => {
  const cut = name.length > MaxNameChars ? name.slice(0, MaxNameChars) : name
  // NFKC leaves printable ASCII as it is.
  const lower = (Printable.test(cut) ? cut : cut.normalize("NFKC")).toLowerCase()
  if (!Needles.some((needle) => lower.includes(needle))) return false
  const all = nameSegments(cut)
  if (BenignSet.has(all.join(" "))) return false
  // A quantity's segment is left out; a gap keeps what stood around it from being joined.
  const segments = all.map((segment, index) => (quantityAt(all, index) ? "|" : segment))
  if (segments.some((segment) => WordSet.has(segment))) return true
  const joined = segments.join("")
  return Joined.some((fragment) => joined.includes(fragment))
}
