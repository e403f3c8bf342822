/** The dashboard's entry: its styles (the terminal's and the charts' too) and the app. */
import "@xterm/xterm/css/xterm.css"
import "uplot/dist/uPlot.min.css"
import "./style.css"
import { render } from "preact"
import { App } from "./app.tsx"

render(<App />, document.getElementById("app")!)
