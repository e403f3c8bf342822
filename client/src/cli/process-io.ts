/** This process as the user CLI's io: its stdin when it carries data, its terminal, and a key asked for unseen. */
import * as fs from "node:fs"
import type { CliTerminal } from "./io.ts"

/** Whether this process's stdin carries data to forward: a pipe or a file, not a terminal or a device like /dev/null. */
export const stdinIsData = () => {
  try {
    const stat = fs.fstatSync(0)
    return stat.isFIFO() || stat.isFile() || stat.isSocket()
  } catch {
    return false
  }
}

/** Reads a line from this process's terminal in raw mode, echoing nothing (a key typed or pasted). */
export const readSecret = (prompt: string) =>
  new Promise<string>((resolve, reject) => {
    const stdin = process.stdin
    // Raw mode (no echo) before the prompt: a key typed or pasted as soon as the prompt shows is never echoed.
    stdin.setRawMode(true)
    process.stderr.write(prompt)
    let value = ""
    const finish = (error?: Error) => {
      stdin.off("data", onData)
      stdin.setRawMode(false)
      stdin.pause()
      process.stderr.write("\n")
      if (error === undefined) resolve(value)
      else reject(error)
    }
    const onData = (chunk: Buffer) => {
      for (const ch of chunk.toString("utf8")) {
        if (ch === "\r" || ch === "\n" || ch === "\x04") return finish()
        if (ch === "\x03") return finish(new Error("cancelled"))
        if (ch === "\x7f" || ch === "\b") value = value.slice(0, -1)
        else if (ch >= " ") value += ch
      }
    }
    stdin.on("data", onData)
    stdin.resume()
  })

/** This process's terminal: stdin (raw mode when it is a TTY), stdout's size, SIGWINCH. */
export const processTerminal = (): CliTerminal => ({
  isTty: process.stdin.isTTY === true,
  size: () => (process.stdout.isTTY === true && process.stdout.columns > 0 && process.stdout.rows > 0 ? { cols: process.stdout.columns, rows: process.stdout.rows } : undefined),
  setRawMode: (raw) => {
    if (process.stdin.isTTY === true) process.stdin.setRawMode(raw)
  },
  input: (onData, onEnd) => {
    const data = (chunk: Buffer) => onData(chunk)
    process.stdin.on("data", data)
    process.stdin.once("end", onEnd)
    process.stdin.resume()
    return () => {
      process.stdin.off("data", data)
      process.stdin.off("end", onEnd)
      process.stdin.pause()
    }
  },
  onResize: (listener) => {
    process.on("SIGWINCH", listener)
    return () => void process.off("SIGWINCH", listener)
  }
})
