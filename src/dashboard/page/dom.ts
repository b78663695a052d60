/**
 * Building DOM nodes without HTML strings: everything the API returns is untrusted, so text
 * only ever reaches the page through text nodes and attribute values, never through markup.
 */
export type Child = Node | string | number | null | undefined | false
export type Attributes = Readonly<Record<string, string | number | boolean | null | undefined>>

const setAttributes = (element: Element, attributes: Attributes): void => {
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue
    element.setAttribute(name, value === true ? "" : String(value))
  }
}

const append = (parent: Node, children: ReadonlyArray<Child>): void => {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)))
  }
}

/** An HTML element with attributes and children (strings become text nodes). */
export const h = <K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: ReadonlyArray<Child>
): HTMLElementTagNameMap[K] => {
  const element = document.createElement(tag)
  setAttributes(element, attributes)
  append(element, children)
  return element
}

/** An SVG element, for the chart. */
export const svg = <K extends keyof SVGElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: ReadonlyArray<Child>
): SVGElementTagNameMap[K] => {
  const element = document.createElementNS("http://www.w3.org/2000/svg", tag)
  setAttributes(element, attributes)
  append(element, children)
  return element
}

/** Replace a node's children. */
export const mount = (parent: Element, ...children: ReadonlyArray<Child>): void => {
  parent.replaceChildren()
  append(parent, children)
}

/** A button that runs `action` when pressed (by mouse or keyboard). */
export const button = (label: string, action: () => void, attributes: Attributes = {}): HTMLButtonElement => {
  const element = h("button", { type: "button", ...attributes }, label)
  element.addEventListener("click", action)
  return element
}

/** A state badge: the colour is decoration, the word carries the meaning. */
export const badge = (state: string): HTMLSpanElement => h("span", { class: `badge badge-${state}` }, state)

/** A value as readable text: strings as they are, anything else as indented JSON. */
export const readable = (value: unknown): HTMLPreElement =>
  h("pre", { class: "value" }, typeof value === "string" ? value : JSON.stringify(value, null, 2))
