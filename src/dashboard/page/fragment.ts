/**
 * Which fragments of the page's URL carry the dashboard's token: `#token=` and then exactly
 * the 64 lowercase hex characters of one. Pure, without the DOM, so Node tests import it.
 */

export const TokenPattern = /^[0-9a-f]{64}$/

/**
 * What a location's fragment says about the token: `none` (not a token fragment, such as a
 * view's `#/audit`), or `given` with the token when it is well formed (`null` when not).
 */
export const tokenOfFragment = (
  hash: string
): { readonly _tag: "none" } | { readonly _tag: "given"; readonly token: string | null } => {
  if (!hash.startsWith("#token=")) return { _tag: "none" }
  const token = hash.slice("#token=".length)
  return { _tag: "given", token: TokenPattern.test(token) ? token : null }
}
