/** Poll `probe` until it gives a value; fail after `timeoutMillis` (a bound, never the assertion). */
export const waitFor = async <A>(
  what: string | (() => string),
  probe: () => A | undefined | Promise<A | undefined>,
  timeoutMillis = 120_000
): Promise<A> => {
  const deadline = Date.now() + timeoutMillis
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline)
      throw new Error(
        `gave up after ${timeoutMillis} ms waiting for ${typeof what === "string" ? what : what()}`
      )
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}
