/**
 * Redaction inside text: every string value of audited arguments, every error message, every line
 * for stderr. Names alone cannot find a secret written into prose, so text is scrubbed for the
 * shapes secrets take there (SECURITY.md lists them):
 *
 * - a PEM private key block, whole;
 * - the user-info of a URL (`postgres://user:pass@host` becomes `postgres://[REDACTED]@host`);
 * - the value of `name=value` or `name: value` when the name is sensitive (redactRules.ts),
 *   quoted or not, with an auth scheme (`Authorization: Bearer …`) or a cookie header's whole line;
 * - `Bearer …` and `Basic …` credentials anywhere;
 * - tokens of well-known formats (GitHub, GitLab, OpenAI/Anthropic `sk-`, Stripe, Slack, AWS
 *   access key ids, Google API keys, npm, Hugging Face, JWTs).
 *
 * Every pattern is linear in the text: matches start only at the start of a run of their
 * characters (a look-behind), quantifiers stay inside one run, and what a scan looks at is
 * either bounded or consumed. test/mcp/redactText.test.ts holds adversarial inputs.
 */
import { isSensitiveName, nameSegments } from "./redactRules.js"

export const Redacted = "[REDACTED]"

const PemBegin = /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----/g
const PemEnd = /-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----/g

const redactPem = (text: string): string => {
  if (!text.includes("PRIVATE KEY")) return text
  let out = ""
  let from = 0
  PemBegin.lastIndex = 0
  for (let begin = PemBegin.exec(text); begin !== null; begin = PemBegin.exec(text)) {
    PemEnd.lastIndex = begin.index + begin[0].length
    const end = PemEnd.exec(text)
    // An unterminated block is cut to the end: the rest may all be key.
    const stop = end === null ? text.length : end.index + end[0].length
    out += `${text.slice(from, begin.index)}${Redacted}`
    from = stop
    PemBegin.lastIndex = stop
  }
  return out + text.slice(from)
}

/**
 * `scheme://userinfo@`: the user-info runs to the last `@` before the authority ends, so a
 * password holding an unescaped `@` is hidden whole.
 */
const UrlUserInfo = /(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{0,31}:\/\/)([^\s/?#"'<>\\`]{1,2048})@/g

const redactUrls = (text: string): string =>
  text.includes("://")
    ? text.replace(UrlUserInfo, (_match, scheme: string, info: string) =>
        info === Redacted ? `${scheme}${info}@` : `${scheme}${Redacted}@`
      )
    : text

/** A credential after an auth scheme looks random: a digit or a symbol, or mixed case inside. */
const looksRandom = (token: string): boolean =>
  /[0-9+/=._~-]/.test(token) || (/[A-Z]/.test(token.slice(1)) && /[a-z]/.test(token))

const AuthSchemes: ReadonlySet<string> = new Set(["basic", "bearer", "digest", "negotiate", "token", "bot"])

/** The start of a `name=value` or `name: value`; the value is read by hand (readValue). */
const NamedValue = /(?<![\p{L}\p{N}_.-])([\p{L}\p{N}_.-]{1,128})\\?["']?[ \t]{0,8}([:=])[ \t]{0,8}/gu

/** The lower-case words our own messages put after `field: `; never taken for a value. */
const MessageWords: ReadonlySet<string> = new Set([
  "a",
  "an",
  "at",
  "expected",
  "is",
  "missing",
  "must",
  "not",
  "the",
  "too",
  "unexpected"
])

const UnquotedEnd = /[\s"'`&,;<>(){}[\]\\]/g
const runEnd = (text: string, from: number): number => {
  UnquotedEnd.lastIndex = from
  const found = UnquotedEnd.exec(text)
  return found === null ? text.length : found.index
}

const HeaderEnd = /["'`\\\n]/g

const lineEnd = (text: string, from: number): number => {
  const found = text.indexOf("\n", from)
  return found === -1 ? text.length : found
}

/** The value that starts at `start`: what to hide (from, to), or undefined when there is none. */
interface Span {
  readonly from: number
  readonly to: number
}

const valueSpan = (text: string, start: number, name: string, separator: string): Span | undefined => {
  if (text.startsWith(Redacted, start)) return undefined
  // A quote, or an escaped quote (the text of a JSON string that holds JSON).
  const escaped = text[start] === "\\" && (text[start + 1] === '"' || text[start + 1] === "'")
  const open = escaped ? start + 1 : start
  const quote = text[open]
  if (quote === '"' || quote === "'") {
    const close = text.indexOf(quote, open + 1)
    // Unclosed on its line: hide the rest of the line. (The newline is looked for only up to
    // the quote, so that many short values do not each scan the whole text.)
    if (close === -1) return { from: open + 1, to: lineEnd(text, open + 1) }
    const newline = text.slice(open + 1, close).indexOf("\n")
    if (newline !== -1) return { from: open + 1, to: open + 1 + newline }
    const to = escaped && text[close - 1] === "\\" ? close - 1 : close
    return to > open + 1 ? { from: open + 1, to } : undefined
  }
  const joined = nameSegments(name).join("")
  if (joined.includes("cookie") || joined.includes("authorization")) {
    // A header's whole value (`a=1; b=2`, `Bearer …`), up to the line's end or a quote.
    HeaderEnd.lastIndex = start
    const to = HeaderEnd.exec(text)?.index ?? text.length
    return to > start ? { from: start, to } : undefined
  }
  const end = runEnd(text, start)
  if (end === start) return undefined
  const word = text.slice(start, end)
  if (separator === ":" && MessageWords.has(word)) return undefined
  const gap = /^[ \t]+/.exec(text.slice(end, end + 16))?.[0].length ?? 0
  if (AuthSchemes.has(word.toLowerCase()) && gap > 0) {
    const next = runEnd(text, end + gap)
    if (next > end + gap) return { from: start, to: next }
  }
  return { from: start, to: end }
}

const redactNamedValues = (text: string): string => {
  if (!text.includes("=") && !text.includes(":")) return text
  let out = ""
  let from = 0
  NamedValue.lastIndex = 0
  for (let match = NamedValue.exec(text); match !== null; match = NamedValue.exec(text)) {
    const start = match.index + match[0].length
    const name = match[1] ?? ""
    const span = isSensitiveName(name) ? valueSpan(text, start, name, match[2] ?? "") : undefined
    // Without a secret here, look again right after the separator, where the next name may start.
    if (span === undefined) {
      NamedValue.lastIndex = start
      continue
    }
    out += `${text.slice(from, span.from)}${Redacted}`
    from = span.to
    NamedValue.lastIndex = Math.max(span.to, start)
  }
  return out + text.slice(from)
}

const BareCredential = /(?<![A-Za-z0-9_-])(Bearer|Basic)([ \t]+)([A-Za-z0-9._~+/=-]{6,})/gi

const redactBareCredentials = (text: string): string =>
  text.replace(BareCredential, (match, scheme: string, space: string, token: string) =>
    looksRandom(token) ? `${scheme}${space}${Redacted}` : match
  )

/** Token formats that are secrets wherever they appear. */
const TokenFormats = new RegExp(
  "(?<![A-Za-z0-9_-])(?:" +
    [
      "gh[pousr]_[A-Za-z0-9]{20,}",
      "github_pat_[A-Za-z0-9_]{20,}",
      "glpat-[A-Za-z0-9_-]{20,}",
      "sk-[A-Za-z0-9_-]{16,}",
      "[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
      "xox[abposr]-[A-Za-z0-9-]{10,}",
      "(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])",
      "AIza[A-Za-z0-9_-]{35}",
      "npm_[A-Za-z0-9]{36}",
      "hf_[A-Za-z0-9]{30,}",
      "eyJ[A-Za-z0-9_-]{5,}\\.eyJ[A-Za-z0-9_-]{5,}\\.[A-Za-z0-9_-]*"
    ].join("|") +
    ")",
  "g"
)

const redactTokens = (text: string): string => text.replace(TokenFormats, Redacted)

/** `text` with every secret this module can find replaced by `[REDACTED]`. */
export const redactText = (text: string): string =>
  redactTokens(redactBareCredentials(redactNamedValues(redactUrls(redactPem(text)))))
