/** Times as people read them: "3 min ago", "1.2 s". */
const parse = (iso: string | null): number | null => {
  if (iso === null) return null
  const millis = Date.parse(iso)
  return Number.isNaN(millis) ? null : millis
}

export const span = (millis: number): string => {
  if (millis < 0) return "0 s"
  if (millis < 10_000) return `${(millis / 1000).toFixed(1)} s`
  const seconds = Math.round(millis / 1000)
  if (seconds < 120) return `${seconds} s`
  const minutes = Math.round(seconds / 60)
  if (minutes < 120) return `${minutes} min`
  const hours = Math.round(minutes / 60)
  return hours < 48 ? `${hours} h` : `${Math.round(hours / 24)} d`
}

export const age = (iso: string | null, now: number = Date.now()): string => {
  const millis = parse(iso)
  return millis === null ? "–" : `${span(now - millis)} ago`
}

/** How long a task ran: from its start to its end, or to now while it runs. */
export const duration = (start: string | null, end: string | null, now: number = Date.now()): string => {
  const from = parse(start)
  if (from === null) return "–"
  return span((parse(end) ?? now) - from)
}

/** A timestamp in the reader's time zone and locale. */
export const when = (iso: string | null): string => {
  const millis = parse(iso)
  return millis === null ? "–" : new Date(millis).toLocaleString()
}

export const shortId = (id: string): string => (id.length > 12 ? `${id.slice(0, 12)}…` : id)

/** As `when`, for a time that may be absent (a fact that is then left out). */
export const whenSet = (iso: string | null): string | null => (iso === null ? null : when(iso))
