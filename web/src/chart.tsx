/** A uPlot chart of one or more series over time (or over dates), sized to its container. */
import { useEffect, useRef } from "preact/hooks"
import uPlot from "uplot"

export interface Series {
  readonly label: string
  readonly values: ReadonlyArray<number | null>
  readonly color: string
}

export const Chart = (props: {
  readonly title: string
  /** Unix seconds. */
  readonly x: ReadonlyArray<number>
  readonly series: ReadonlyArray<Series>
  readonly format?: (value: number) => string
  readonly bars?: boolean
  readonly height?: number
  /** A live chart: its x axis spans at least this many seconds, ending at the latest reading. */
  readonly minSpan?: number
}) => {
  const host = useRef<HTMLDivElement>(null)
  const plot = useRef<uPlot | null>(null)
  const shape = `${props.series.map((s) => s.label).join("|")}:${props.bars === true}`
  useEffect(() => {
    if (host.current === null) return
    const format = props.format ?? ((v: number) => String(v))
    const options: uPlot.Options = {
      width: host.current.clientWidth || 300,
      height: props.height ?? 180,
      legend: { show: true },
      scales: { x: props.minSpan === undefined ? { time: true } : { time: true, range: (_u, min, max) => [Math.min(min, max - props.minSpan!), max] } },
      axes: [{ stroke: "currentColor" }, { stroke: "currentColor", size: 70, values: (_u, values) => values.map((v) => format(v)) }],
      series: [
        {},
        ...props.series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          value: (_u: uPlot, v: number | null) => (v === null ? "—" : format(v)),
          ...(props.bars === true ? { fill: s.color, paths: uPlot.paths.bars!({ size: [0.6, 40] }) } : {})
        }))
      ]
    }
    plot.current = new uPlot(options, [[...props.x], ...props.series.map((s) => [...s.values])] as uPlot.AlignedData, host.current)
    const resized = new ResizeObserver(() => plot.current?.setSize({ width: host.current?.clientWidth ?? 300, height: props.height ?? 180 }))
    resized.observe(host.current)
    return () => {
      resized.disconnect()
      plot.current?.destroy()
      plot.current = null
    }
  }, [shape])
  useEffect(() => {
    plot.current?.setData([[...props.x], ...props.series.map((s) => [...s.values])] as uPlot.AlignedData)
  }, [props.x, props.series])
  return (
    <figure class="chart">
      <figcaption>{props.title}</figcaption>
      <div ref={host} role="img" aria-label={props.title} />
    </figure>
  )
}
