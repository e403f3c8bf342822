/**
 * Port bridges an emulator opens so that its HTTP proxy can reach a port inside a sandbox. A bridge is a unix
 * socket in a directory only root may enter (0700), never a TCP port: no other local user, and no sandbox (each
 * has its own network namespace and sees none of the host's files), can connect to it. Each bridge belongs to
 * one grant (a preview token); closing it stops the listener, removes its socket file and cuts every connection
 * through it, so a revoked or expired grant, or a stopped or deleted sandbox, leaves nothing reachable behind.
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

/** A unix socket path is at most 107 bytes on Linux; leave room for the file name. */
const MAX_DIR_LENGTH = 80

export interface Bridge {
  readonly key: string
  readonly sandboxId: string
  readonly socketPath: string
  /** Resolves once the socket listens. */
  readonly ready: Promise<void>
}

export interface PortBridges {
  /** The bridge of this grant, opened on first use. `connect` opens the stream to the sandbox's port. */
  readonly open: (key: string, sandboxId: string, connect: () => Promise<net.Socket>) => Bridge
  readonly close: (key: string) => void
  readonly closeSandbox: (sandboxId: string) => void
  readonly closeAll: () => void
  /** The directory holding the sockets (root only). */
  readonly dir: string
}

/** A root-only directory for sockets: `<home>/bridges`, or a fresh one under the temp dir when that path is too long. */
const privateDir = (home: string): { readonly dir: string; readonly temporary: boolean } => {
  let dir = path.join(home, "bridges")
  const temporary = dir.length > MAX_DIR_LENGTH
  if (temporary) dir = fs.mkdtempSync(path.join(os.tmpdir(), "sgw-bridges-"))
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  // mkdir keeps an existing directory's mode, and the umask may have narrowed nothing: set it exactly.
  fs.chmodSync(dir, 0o700)
  const stat = fs.lstatSync(dir)
  if (!stat.isDirectory() || stat.uid !== process.getuid?.()) throw new Error(`the bridge directory ${dir} is not a directory owned by this user`)
  // Sockets of an earlier run listen no more: remove them.
  for (const name of fs.readdirSync(dir)) if (name.endsWith(".sock")) fs.rmSync(path.join(dir, name), { force: true })
  return { dir, temporary }
}

interface Open extends Bridge {
  readonly server: net.Server
  readonly sockets: Set<net.Socket>
}

export const makePortBridges = (home: string): PortBridges => {
  const { dir, temporary } = privateDir(home)
  const bridges = new Map<string, Open>()

  const close = (key: string) => {
    const bridge = bridges.get(key)
    if (bridge === undefined) return
    bridges.delete(key)
    bridge.server.close()
    for (const socket of bridge.sockets) socket.destroy()
    bridge.sockets.clear()
    fs.rmSync(bridge.socketPath, { force: true })
  }

  const open = (key: string, sandboxId: string, connect: () => Promise<net.Socket>): Bridge => {
    const existing = bridges.get(key)
    if (existing !== undefined) return existing
    const socketPath = path.join(dir, `${crypto.randomBytes(8).toString("hex")}.sock`)
    const sockets = new Set<net.Socket>()
    const track = (socket: net.Socket) => {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
    }
    const server = net.createServer((client) => {
      track(client)
      client.pause()
      connect().then(
        (upstream) => {
          if (!bridges.has(key)) {
            // Closed while connecting.
            upstream.destroy()
            client.destroy()
            return
          }
          track(upstream)
          client.pipe(upstream)
          upstream.pipe(client)
          client.resume()
          upstream.on("error", () => client.destroy())
          client.on("error", () => upstream.destroy())
          upstream.on("close", () => client.destroy())
          client.on("close", () => upstream.destroy())
        },
        () => client.destroy()
      )
    })
    const ready = new Promise<void>((resolve, reject) => {
      server.once("error", reject)
      server.listen(socketPath, () => {
        fs.chmodSync(socketPath, 0o600)
        resolve()
      })
    })
    ready.catch(() => close(key))
    const bridge: Open = { key, sandboxId, socketPath, ready, server, sockets }
    bridges.set(key, bridge)
    return bridge
  }

  return {
    open,
    close,
    closeSandbox: (sandboxId) => {
      for (const bridge of [...bridges.values()]) if (bridge.sandboxId === sandboxId) close(bridge.key)
    },
    closeAll: () => {
      for (const key of [...bridges.keys()]) close(key)
      if (temporary) fs.rmSync(dir, { recursive: true, force: true })
    },
    dir
  }
}
