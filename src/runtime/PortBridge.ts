/**
 * Byte streams to ports inside a jail, through the agent's port bridge (agent/bridge.ts): its socket adopted like
 * the agent's (AgentChannel.ts), then a one-line handshake naming the port, bounded in bytes and time.
 */
import * as net from "node:net"
import { adoptSocket, BRIDGE_SOCKET, ctlSocket, isConnectError, RESTART_GRACE_MS } from "./AgentChannel.ts"
import { type JailState } from "./Jail.ts"
import { openView, unavailable } from "./JailView.ts"

/**
 * A byte stream to 127.0.0.1:port inside the jail through the agent's port bridge (adopted like the agent's
 * socket). The bridge answers one line, "OK" or an error, at most 64 bytes, within the time limit.
 */
export const connectBridge = async (state: JailState, port: number, timeoutMs: number, shutdown: AbortSignal): Promise<net.Socket> => {
  const deadline = Date.now() + Math.max(timeoutMs, RESTART_GRACE_MS)
  for (;;) {
    if (shutdown.aborted) throw unavailable("the runtime is shut down")
    const view = openView(state)
    let socket: net.Socket | undefined
    try {
      socket = await new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect(ctlSocket(view, BRIDGE_SOCKET))
        s.once("connect", () => resolve(s))
        s.once("error", reject)
      })
    } catch (e) {
      view.close()
      if (isConnectError(e) && Date.now() < deadline) {
        const v = openView(state)
        try {
          if (!adoptSocket(v, BRIDGE_SOCKET, state.hostUid)) await Bun.sleep(20)
        } finally {
          v.close()
        }
        continue
      }
      throw unavailable("the sandbox's port bridge does not answer")
    }
    view.close()
    return handshake(socket, port, Math.max(100, deadline - Date.now()))
  }
}

const handshake = (socket: net.Socket, port: number, timeoutMs: number) =>
  new Promise<net.Socket>((resolve, reject) => {
    let head = Buffer.alloc(0)
    const timer = setTimeout(() => fail("the sandbox's port bridge did not answer in time"), timeoutMs)
    const done = () => {
      clearTimeout(timer)
      socket.off("data", onData)
      socket.removeAllListeners("error")
      socket.removeAllListeners("close")
    }
    const fail = (message: string) => {
      done()
      socket.destroy()
      reject(unavailable(message))
    }
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk])
      const newline = head.indexOf(10)
      if (newline < 0) {
        if (head.length > 64) fail("the sandbox's port bridge sent an invalid answer")
        return
      }
      socket.pause()
      if (head.subarray(0, newline).toString() !== "OK") return fail(`nothing listens on port ${port} in the sandbox`)
      done()
      const rest = head.subarray(newline + 1)
      if (rest.length > 0) socket.unshift(rest)
      resolve(socket)
    }
    socket.on("data", onData)
    socket.once("error", () => fail("the sandbox's port bridge does not answer"))
    socket.once("close", () => fail(`nothing listens on port ${port} in the sandbox`))
    socket.write(`PORT ${port}\n`)
  })
