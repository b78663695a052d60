/**
 * The token this tab holds. `relaykeep dashboard` prints `http://127.0.0.1:PORT/#token=…`: a
 * browser never sends a URL's fragment to any server, so the token reaches only this page,
 * which keeps it in `sessionStorage` (this origin, this port and this tab alone, gone when the
 * tab closes) and sends it as `Authorization: Bearer` on every API call. No cookie carries it:
 * cookies are not scoped to a port, so one would go to every other service on 127.0.0.1.
 */

import { TokenPattern, tokenOfFragment } from "./fragment.js"

const StorageKey = "relaykeep.dashboard.token"

/** Where a token is kept when sessionStorage is refused (storage disabled): until a reload. */
let fallback: string | null = null

const remember = (token: string): void => {
  fallback = token
  try {
    window.sessionStorage.setItem(StorageKey, token)
  } catch {
    // Storage refused: the token lives in this page until it is reloaded.
  }
}

/** The token this tab holds, if any. */
export const currentToken = (): string | null => {
  let stored: string | null = null
  try {
    stored = window.sessionStorage.getItem(StorageKey)
  } catch {
    stored = null
  }
  if (stored !== null && TokenPattern.test(stored)) return stored
  return fallback
}

/**
 * At load: a `#token=` fragment replaces the token this tab held, and leaves the address bar
 * (and the history entry) at once, so it is not shown, bookmarked or shared. Returns the token
 * the tab holds afterwards.
 */
export const takeTokenFromLocation = (): string | null => {
  const fragment = tokenOfFragment(window.location.hash)
  if (fragment._tag === "given") {
    if (fragment.token !== null) remember(fragment.token)
    window.history.replaceState(null, "", `${window.location.pathname}${window.location.search}`)
  }
  return currentToken()
}
