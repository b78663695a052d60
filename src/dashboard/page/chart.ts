/** Tasks per hour over the last day: stacked SVG bars built node by node (no markup strings). */
import { h, svg } from "./dom.js"
import { number, text } from "./json.js"

const Series: ReadonlyArray<string> = ["submitted", "complete", "failed", "cancelled"]

const Width = 480
const Height = 120
const Gap = 2

export const hourlyChart = (buckets: ReadonlyArray<unknown>): HTMLElement => {
  const count = Math.max(buckets.length, 1)
  const peak = Math.max(1, ...buckets.flatMap((bucket) => Series.map((name) => number(bucket, name) ?? 0)))
  const slot = Width / count
  const bar = Math.max(1, (slot - Gap * 2) / Series.length)
  const chart = svg("svg", {
    viewBox: `0 0 ${Width} ${Height + 16}`,
    class: "chart",
    role: "img",
    "aria-label": "Tasks per hour over the last 24 hours: submitted, complete, failed and cancelled"
  })
  chart.appendChild(svg("line", { x1: 0, y1: Height, x2: Width, y2: Height, class: "axis" }))
  buckets.forEach((bucket, index) => {
    const start = text(bucket, "start")
    Series.forEach((name, series) => {
      const value = number(bucket, name) ?? 0
      if (value === 0) return
      const height = Math.max(1, (value / peak) * Height)
      chart.appendChild(
        svg(
          "rect",
          {
            x: (index * slot + Gap + series * bar).toFixed(1),
            y: (Height - height).toFixed(1),
            width: bar.toFixed(1),
            height: height.toFixed(1),
            class: `bar bar-${name}`
          },
          svg("title", {}, `${start === null ? "" : new Date(start).toLocaleTimeString()}: ${value} ${name}`)
        )
      )
    })
  })
  chart.appendChild(svg("text", { x: 0, y: Height + 14, class: "tick" }, "24 h ago"))
  chart.appendChild(svg("text", { x: Width, y: Height + 14, class: "tick end" }, "now"))
  const legend = h(
    "ul",
    { class: "legend" },
    ...Series.map((name) =>
      h("li", {}, h("span", { class: `swatch bar-${name}`, "aria-hidden": "true" }), name)
    )
  )
  return h("figure", { class: "chart-figure" }, chart, legend)
}
