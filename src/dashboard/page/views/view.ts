/** A view draws into the main element and returns what stops it (timers, live listeners). */
export type Stop = () => void
export type View = (root: HTMLElement, argument: string) => Stop

/** A failure to show in place of what could not be loaded (announced to screen readers). */
export const problem = (message: string): HTMLParagraphElement => {
  const element = document.createElement("p")
  element.className = "problem"
  element.setAttribute("role", "alert")
  element.textContent = message
  return element
}
