/**
 * Help as a person reads it, rendered from @effect/cli's own help documents: usage lines that
 * start with the program's name, option descriptions without the library's sentence about each
 * option's type, optional options (repeatable ones too) in brackets, and escape codes only when
 * asked for. Every command gets it without work of its own: it reads the documents the library
 * builds from the options.
 */
import type { HelpDoc } from "@effect/cli"
import type { Span } from "@effect/cli/HelpDoc/Span"
import type { Usage } from "@effect/cli/Usage"
import { Option } from "effect"

export interface HelpStyle {
  /** Bold headings and names: for a terminal only. */
  readonly colour: boolean
  /** The column to wrap at. */
  readonly width: number
}

export interface HelpPage {
  /** The first line, e.g. `relaykeep 0.1.0`. */
  readonly title: string
  /** The words before the command's own name in its usage: `["relaykeep"]` for `worker`. */
  readonly parents: ReadonlyArray<string>
  readonly usage: Usage
  readonly doc: HelpDoc.HelpDoc
  /** A last paragraph, such as how to get a subcommand's help. */
  readonly footer?: string
}

/** The text of a span, without its styles. */
export const spanText = (span: Span): string => {
  switch (span._tag) {
    case "Text":
    case "URI":
      return span.value
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
    case "Highlight":
    case "Strong":
    case "Weak":
      return spanText(span.value)
  }
}

/** The blocks of a document in order, its sequences flattened. */
const blocks = (doc: HelpDoc.HelpDoc): ReadonlyArray<HelpDoc.HelpDoc> =>
  doc._tag === "Sequence" ? [...blocks(doc.left), ...blocks(doc.right)] : doc._tag === "Empty" ? [] : [doc]

/** Every paragraph of a document, each as one line of text, in order. */
const paragraphs = (doc: HelpDoc.HelpDoc): ReadonlyArray<string> =>
  blocks(doc).flatMap((block) => {
    switch (block._tag) {
      case "Header":
      case "Paragraph":
        return [spanText(block.value)]
      case "DescriptionList":
        return block.definitions.flatMap(([span, inner]) => [spanText(span), ...paragraphs(inner)])
      case "Enumeration":
        return block.elements.flatMap(paragraphs)
      default:
        return []
    }
  })

/** A document on one line, without escape codes: what a usage error says. */
export const docText = (doc: HelpDoc.HelpDoc): string => paragraphs(doc).join(" ")

/** One option as the help lists it. */
export interface OptionEntry {
  /** Its names and value, e.g. `--root text` or `(-h, --help)`. */
  readonly heading: string
  readonly names: ReadonlyArray<string>
  readonly description: ReadonlyArray<string>
  readonly optional: boolean
  readonly repeatable: boolean
  readonly fallback: Option.Option<string>
  /** Whether the library says it falls back on an environment variable. */
  readonly fromEnvironment: boolean
}

// The sentences the library adds to an option's description. They are turned into the brackets
// of the usage line and the notes after the option's name.
const OptionalSentence = /^This setting is optional\.(?: Defaults to: (.*))?$/
const ZeroOrMoreSentence = "This option may be repeated zero or more times."
const RepeatedSentence = /^This option (?:may|must) be repeated/
const EnvironmentSentence = "This option can be set from environment variables."

/** `auto | text | json` as `auto|text|json`: one word in a usage line. */
const compact = (text: string) => text.replace(/ \| /g, "|")

const optionEntry = (heading: string, block: HelpDoc.HelpDoc): OptionEntry => {
  // The first paragraph is the library's description of the value's type ("A user-defined
  // piece of text.", "An integer."): the heading already names the type.
  const [, ...rest] = paragraphs(block)
  const description: Array<string> = []
  let optional = false
  let repeatable = false
  let fromEnvironment = false
  let fallback = Option.none<string>()
  for (const text of rest) {
    const optionalMatch = OptionalSentence.exec(text)
    if (optionalMatch !== null) {
      optional = true
      fallback = Option.fromNullable(optionalMatch[1])
    } else if (RepeatedSentence.test(text)) {
      repeatable = true
      optional = optional || text === ZeroOrMoreSentence
    } else if (text === EnvironmentSentence) fromEnvironment = true
    else if (text.trim() !== "") description.push(text)
  }
  const shown = compact(repeatable ? heading.replace(/(?:\.\.\.| \d+\+| \d+ - \d+)$/, "") : heading)
  const names = shown
    .replace(/[(),]/g, " ")
    .split(/\s+/)
    .filter((word) => word.startsWith("-"))
  return { heading: shown, names, description, optional, repeatable, fallback, fromEnvironment }
}

interface CommandEntry {
  readonly name: string
  readonly description: string
}

/**
 * A subcommand as the library lists it: its whole usage, padding, then its description. The
 * name is the usage's leading words (`audit list`), before its first option.
 */
const commandEntry = (text: string): CommandEntry => {
  const split = /^(.*?\S)\s{2,}(\S.*)?$/.exec(text)
  const usage = split?.[1] ?? text.trim()
  const words: Array<string> = []
  for (const word of usage.split(/\s+/)) {
    if (!/^[a-z][a-z0-9-]*$/.test(word)) break
    words.push(word)
  }
  return { name: words.join(" "), description: split?.[2] ?? "" }
}

interface Sections {
  readonly description: ReadonlyArray<string>
  readonly options: ReadonlyArray<OptionEntry>
  readonly commands: ReadonlyArray<CommandEntry>
}

/** The parts of a command's help document, by the library's section headers. */
export const readHelpDoc = (doc: HelpDoc.HelpDoc): Sections => {
  const description: Array<string> = []
  const options: Array<OptionEntry> = []
  const commands: Array<CommandEntry> = []
  for (const block of blocks(doc)) {
    if (block._tag === "Paragraph") description.push(spanText(block.value))
    else if (block._tag === "DescriptionList")
      for (const [span, inner] of block.definitions) options.push(optionEntry(spanText(span), inner))
    else if (block._tag === "Enumeration")
      for (const element of block.elements) commands.push(...paragraphs(element).map(commandEntry))
  }
  return { description, options, commands }
}

/**
 * A usage as separate units (`[--root text]`, `--id text`), each kept whole on a line. A
 * repeated option that may be left out is shown in brackets, which the library does not do.
 */
export const usageUnits = (usage: Usage, optional: ReadonlySet<string>): ReadonlyArray<string> => {
  const units = (inner: Usage) => usageUnits(inner, optional).join(" ")
  switch (usage._tag) {
    case "Empty":
      return []
    case "Mixed":
      return ["<command>"]
    case "Named": {
      const names = usage.names.length > 1 ? `(${usage.names.join(", ")})` : usage.names.join("")
      return [
        Option.match(usage.acceptedValues, { onNone: () => names, onSome: (v) => `${names} ${compact(v)}` })
      ]
    }
    case "Optional": {
      // An option with both a default and a fallback is optional twice over; one pair of brackets.
      let inner = usage.usage
      while (inner._tag === "Optional") inner = inner.usage
      return [`[${units(inner)}]`]
    }
    case "Repeated": {
      const inner = usage.usage
      const mayBeLeftOut = inner._tag === "Named" && inner.names.some((name) => optional.has(name))
      return [mayBeLeftOut ? `[${units(inner)}]...` : `${units(inner)}...`]
    }
    case "Alternation":
      return [`(${units(usage.left)} | ${units(usage.right)})`]
    case "Concat":
      return [...usageUnits(usage.left, optional), ...usageUnits(usage.right, optional)]
  }
}

/** The names in a usage, in order. */
const namesIn = (usage: Usage): ReadonlyArray<string> => {
  switch (usage._tag) {
    case "Named":
      return usage.names
    case "Optional":
    case "Repeated":
      return namesIn(usage.usage)
    case "Alternation":
    case "Concat":
      return [...namesIn(usage.left), ...namesIn(usage.right)]
    default:
      return []
  }
}

/** For each option that is one of alternatives (`Options.orElse`), all of them. */
const alternativesIn = (usage: Usage): ReadonlyMap<string, ReadonlyArray<string>> => {
  switch (usage._tag) {
    case "Alternation": {
      const names = namesIn(usage)
      return new Map(names.map((name) => [name, names]))
    }
    case "Optional":
    case "Repeated":
      return alternativesIn(usage.usage)
    case "Concat":
      return new Map([...alternativesIn(usage.left), ...alternativesIn(usage.right)])
    default:
      return new Map()
  }
}

/** Words packed into lines of at most `width` (a longer word keeps a line of its own). */
const wrap = (words: ReadonlyArray<string>, width: number, first: string, rest: string) => {
  const lines: Array<string> = []
  let line = first
  let empty = true
  for (const word of words) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line)
      line = rest
      empty = true
    }
    line = empty ? line + word : `${line} ${word}`
    empty = false
  }
  if (!empty) lines.push(line)
  return lines
}

const wrapText = (text: string, width: number, first: string, rest: string = first) =>
  wrap(
    text.split(/\s+/).filter((word) => word !== ""),
    width,
    first,
    rest
  )

/** The help of a command as text: plain, or with bold headings and names for a terminal. */
export const renderHelp = (page: HelpPage, style: HelpStyle): string => {
  const bold = (text: string) => (style.colour ? `\u001b[1m${text}\u001b[0m` : text)
  const sections = readHelpDoc(page.doc)
  const optional = new Set(sections.options.filter((o) => o.optional).flatMap((o) => o.names))
  const out: Array<string> = [page.title, ""]

  // The library's usage of a command with subcommands may leave out where the subcommand goes.
  const units = usageUnits(page.usage, optional)
  const takesCommand = sections.commands.length > 0 && !units.includes("<command>")
  out.push(bold("USAGE"))
  out.push(
    ...wrap([...page.parents, ...units, ...(takesCommand ? ["<command>"] : [])], style.width, "  ", "      ")
  )

  if (sections.description.length > 0) {
    out.push("", bold("DESCRIPTION"))
    for (const text of sections.description) out.push(...wrapText(text, style.width, "  "))
  }

  if (sections.options.length > 0) {
    out.push("", bold("OPTIONS"))
    const alternatives = alternativesIn(page.usage)
    for (const entry of sections.options) {
      // One of alternatives is required only when the others are not given.
      const either = entry.names.flatMap((name) => alternatives.get(name) ?? [])
      const notes = [
        ...(entry.optional
          ? []
          : either.length > 0
            ? [`required, or ${either.filter((n) => !entry.names.includes(n)).join(", ")}`]
            : ["required"]),
        ...(entry.repeatable ? ["repeatable"] : []),
        ...Option.match(entry.fallback, { onNone: () => [], onSome: (v) => [`default: ${v}`] })
      ]
      out.push(`  ${bold(entry.heading)}${notes.length > 0 ? `  (${notes.join(", ")})` : ""}`)
      for (const text of entry.description) out.push(...wrapText(text, style.width, "      "))
    }
  }

  // The library lists a command among its own subcommands; it is the page itself.
  const own = units[0]
  const commands = sections.commands.filter((c) => c.name !== "" && c.name !== own)
  if (commands.length > 0) {
    out.push("", bold("COMMANDS"))
    const column = Math.max(...commands.map((c) => c.name.length)) + 4
    for (const c of commands) {
      const [first = "", ...more] = wrapText(c.description, style.width - column, "")
      out.push(`  ${bold(c.name)}${" ".repeat(column - 2 - c.name.length)}${first}`.trimEnd())
      for (const line of more) out.push(`${" ".repeat(column)}${line}`)
    }
  }

  if (page.footer !== undefined) out.push("", ...wrapText(page.footer, style.width, ""))
  return out.join("\n")
}
