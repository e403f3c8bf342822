/**
 * The gateway's channel to a jail's agent (ARCHITECTURE.md §5 threat model: the agent, like everything in the jail,
 * is hostile).
 *
 * Where: the agent binds its sockets in its run directory, which the sandbox writes. The gateway never connects
 * there. It "adopts" each new socket: rename(2) moves the entry (never following it) into the disk's root-only
 * ctl/ directory, on the same filesystem, and lstat then requires a socket owned by the sandbox's own host uid;
 * anything else is removed and the call fails. The gateway only connects to sockets in ctl/. The disk is the
 * sandbox's own filesystem, so a hard link there can only name the sandbox's own sockets; a symlink is moved,
 * not followed. When the adopted socket refuses (the agent restarted under its shell loop, or the sandbox
 * replaced it), the new one is adopted from the run directory. A sandbox can replace its own agent: that gains
 * it nothing outside its own sandbox, because of what follows.
 *
 * How the disk is reached: through a verified handle on it (JailView.ts). Connections are never pooled (each call
 * connects anew), so none outlives its handle. The port bridge's socket is adopted the same way (PortBridge.ts).
 *
 * What is read: every call has a time limit and a byte cap on the answer, read incrementally; the caller
 * validates its shape (AgentWire.ts). Failures are RuntimeErrors in the user's terms. The caps count the bytes as
 * they came over the socket, and those are the bytes used: fetch never decompresses here (`decompress: false`, which
 * also leaves out the Accept-Encoding it would send), and an answer that declares any Content-Encoding is refused
 * before its body is read — our agent never compresses, so only a replaced one would, to make a ~1 MB body inflate
 * to gigabytes inside the gateway behind a cap that saw only the 1 MB. Refusing (rather than inflating under a cap)
 * is the simplest rule that keeps every path bounded, the native pass-through of a stated length included.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { passedOn } from "../domain/Bodies.ts"
import { DISK_CTL, DISK_RUN } from "./Disk.ts"
import { type JailState } from "./Jail.ts"
import { type JailView, openView, unavailable } from "./JailView.ts"
import { backoff } from "./Proc.ts"
import { RuntimeError } from "./LocalRuntime.ts"

export const AGENT_SOCKET = "agent.sock"
export const BRIDGE_SOCKET = "bridge.sock"
/**
 * How long a call waits for an agent that is restarting (its shell loop sleeps 0.2 s between runs). Past it, nothing
 * answering is an answer: the agent is dead (a sandbox may kill it and stop its loop), and the call fails now rather
 * than at its time limit — a streamed read's is half an hour, and an API request would be cut without a word long
 * before that.
 */
export const RESTART_GRACE_MS = 3000

export const NOT_ANSWERING = "the sandbox agent does not answer"
export const TOO_SLOW = "the sandbox agent did not answer in time"
export const TOO_LARGE = "the sandbox agent sent an answer larger than allowed"
export const INVALID = "the sandbox agent sent an invalid answer"

/**
 * Moves a socket the agent bound in its run directory to ctl/ and checks it. Returns false when there was none
 * to adopt (the agent has not bound it yet). Throws when what was there is not a socket of the sandbox.
 */
export const adoptSocket = (view: JailView, name: string, hostUid: number): boolean => {
  const from = path.join(view.base, DISK_RUN, name)
  const to = path.join(view.base, DISK_CTL, name)
  for (let attempt = 0; ; attempt++) {
    try {
      fs.renameSync(from, to)
      break
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code
      if (code === "ENOENT") return false
      // Whatever sits in ctl/ under that name (left by an earlier bad adoption) cannot be renamed over.
      if (attempt === 0 && (code === "EISDIR" || code === "ENOTEMPTY" || code === "EEXIST" || code === "ENOTDIR")) {
        fs.rmSync(to, { recursive: true, force: true })
        continue
      }
      throw unavailable(NOT_ANSWERING, `adopting ${name}: ${code ?? String(e)}`)
    }
  }
  const stat = fs.lstatSync(to)
  if (!stat.isSocket() || stat.uid !== hostUid) {
    fs.rmSync(to, { recursive: true, force: true })
    throw unavailable(NOT_ANSWERING, `the sandbox put a ${stat.isSymbolicLink() ? "symlink" : stat.isSocket() ? `socket of uid ${stat.uid}` : "non-socket"} where its agent's ${name} belongs`)
  }
  return true
}

export const ctlSocket = (view: JailView, name: string) => path.join(view.base, DISK_CTL, name)

export interface AgentCall {
  readonly method?: string | undefined
  /** A stream is sent as it comes (and can be sent once: a call that must reconnect then fails). */
  readonly body?: Uint8Array | string | ReadableStream<Uint8Array> | undefined
  readonly contentType?: string | undefined
  /** The whole call, adopting a restarted agent's socket included. */
  readonly timeoutMs: number
  /** How long the answer's head may take, when less than the whole call. */
  readonly headTimeoutMs?: number | undefined
  /** The answer's body beyond this many bytes fails the call. */
  readonly maxBytes: number
}

export interface AgentAnswer {
  readonly status: number
  readonly headers: Headers
  readonly body: Buffer
}

export const isConnectError = (e: unknown) => {
  const code = (e as { code?: unknown } | null)?.code
  return code === "ENOENT" || code === "ECONNREFUSED"
}

/**
 * Reads a body up to `max` bytes; beyond that the request is aborted. A body whose length is declared within the
 * cap is read in one native call (HTTP framing stops it at that length); any other is read piece by piece.
 */
const readCapped = async (response: Response, max: number, abort: () => void): Promise<Buffer> => {
  const declared = response.headers.get("content-length")
  if (declared !== null && /^\d{1,15}$/.test(declared)) {
    if (Number(declared) > max) {
      abort()
      throw unavailable(TOO_LARGE)
    }
    return Buffer.from(await response.arrayBuffer())
  }
  if (response.body === null) return Buffer.alloc(0)
  const reader = response.body.getReader()
  const chunks: Array<Uint8Array> = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.length
    if (total > max) {
      abort()
      void reader.cancel().catch(() => undefined)
      throw unavailable(TOO_LARGE)
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks, total)
}

/** A request that reached the agent: its answer's head, its body unread, and how to end the exchange. */
interface Exchange {
  readonly response: Response
  readonly controller: AbortController
  readonly shutdown: AbortSignal
  /** Releases the time limit and the shutdown hook (the connection stays until the body is read or cancelled). */
  readonly done: () => void
}

/**
 * Sends one HTTP request to the jail's agent over its adopted socket, within the time limit. A connection that
 * cannot be made (nothing adopted yet, or the adopted agent is gone) adopts the socket the agent bound anew and
 * tries again for RESTART_GRACE_MS at most; a request that reached the agent is never sent twice.
 */
const exchange = async (state: JailState, route: string, call: AgentCall, shutdown: AbortSignal): Promise<Exchange> => {
  const deadline = Date.now() + call.timeoutMs
  const connectBy = Date.now() + Math.min(call.timeoutMs, RESTART_GRACE_MS)
  for (;;) {
    if (shutdown.aborted) throw unavailable("the runtime is shut down")
    const view = openView(state)
    const controller = new AbortController()
    const onShutdown = () => controller.abort()
    shutdown.addEventListener("abort", onShutdown)
    // Unref'd: a limit must not keep a process alive on its own (the request itself does while it runs).
    const timer = setTimeout(() => controller.abort(), Math.max(1, deadline - Date.now()))
    timer.unref()
    const done = () => {
      clearTimeout(timer)
      shutdown.removeEventListener("abort", onShutdown)
    }
    // The answer's head must come within `headTimeoutMs` (when given) even if the whole call may take longer.
    const headTimer = call.headTimeoutMs === undefined ? undefined : setTimeout(() => controller.abort(), call.headTimeoutMs)
    let response: Response
    try {
      response = await fetch(`http://agent${route}`, {
        method: call.method ?? "GET",
        ...(call.body !== undefined ? { body: call.body, ...(call.body instanceof ReadableStream ? { duplex: "half" } : {}) } : {}),
        ...(call.contentType !== undefined ? { headers: { "content-type": call.contentType } } : {}),
        signal: controller.signal,
        unix: ctlSocket(view, AGENT_SOCKET),
        keepalive: false,
        // The body as it came: never inflated (see the top of this file).
        decompress: false
      } as RequestInit)
    } catch (e) {
      done()
      if (isConnectError(e) && Date.now() < connectBy) {
        // The agent restarted (or has not adopted yet): its new socket waits in the run directory.
        if (!adoptSocket(view, AGENT_SOCKET, state.hostUid)) await Bun.sleep(20)
        continue
      }
      if (controller.signal.aborted) throw unavailable(shutdown.aborted ? "the runtime is shut down" : TOO_SLOW)
      throw unavailable(NOT_ANSWERING)
    } finally {
      clearTimeout(headTimer)
      // The connection is made: the handle on the jail is not needed to read the answer.
      view.close()
    }
    const encoding = response.headers.get("content-encoding")
    if (encoding !== null && encoding.trim().toLowerCase() !== "identity") {
      controller.abort()
      done()
      throw unavailable(INVALID, `the answer declares Content-Encoding ${encoding.slice(0, 40)}`)
    }
    return { response, controller, shutdown, done }
  }
}

/** The error for a body that could not be read to its end: too slow, shut down, or the agent went away. */
const readError = (x: Exchange) => unavailable(x.shutdown.aborted ? "the runtime is shut down" : x.controller.signal.aborted ? TOO_SLOW : NOT_ANSWERING)

/** One request to the jail's agent, its answer read whole: bounded in time and size. */
export const callAgent = async (state: JailState, route: string, call: AgentCall, shutdown: AbortSignal): Promise<AgentAnswer> => {
  const x = await exchange(state, route, call, shutdown)
  try {
    const body = await readCapped(x.response, call.maxBytes, () => x.controller.abort())
    return { status: x.response.status, headers: x.response.headers, body }
  } catch (e) {
    if (e instanceof RuntimeError) throw e
    throw readError(x)
  } finally {
    x.done()
  }
}

/**
 * One request whose 2xx answer's body is handed on as it comes (a file read of any size, memory flat): exactly the
 * length `lengthOf` finds in the answer's head (it throws for a head it refuses), or the stream errors — more is
 * never passed on; fewer means the file changed or the agent went away. The time limit covers the whole
 * transfer, and a body that stops coming for `idleMs` ends it sooner. Any other answer is read whole, as
 * `callAgent` reads it.
 */
export const streamAgent = async (
  state: JailState,
  route: string,
  call: AgentCall & { readonly lengthOf: (headers: Headers) => number; readonly idleMs: number },
  shutdown: AbortSignal
): Promise<{ readonly _tag: "Stream"; readonly headers: Headers; readonly body: ReadableStream<Uint8Array> } | { readonly _tag: "Refused"; readonly answer: AgentAnswer }> => {
  const x = await exchange(state, route, call, shutdown)
  const { response } = x
  if (response.status < 200 || response.status > 299) {
    try {
      return { _tag: "Refused", answer: { status: response.status, headers: response.headers, body: await readCapped(response, call.maxBytes, () => x.controller.abort()) } }
    } catch (e) {
      throw e instanceof RuntimeError ? e : readError(x)
    } finally {
      x.done()
    }
  }
  let length: number
  try {
    length = call.lengthOf(response.headers)
  } catch (e) {
    x.controller.abort()
    x.done()
    throw e
  }
  if (response.body !== null && response.headers.get("content-length") === String(length) && !response.headers.has("transfer-encoding")) {
    // HTTP framing holds the body to that length (fetch fails one that ends short): handed on as fetch gives it,
    // no byte through JavaScript. The whole-transfer limit stays armed (nothing here sees the body end), so a
    // body that stalls is cut at the latest then; its reader's own idle timeout (a server's) usually comes first.
    return { _tag: "Stream", headers: response.headers, body: response.body }
  }
  const reader = (response.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() })).getReader()
  let received = 0
  const body = new ReadableStream<Uint8Array>({
    pull: async (controller) => {
      let chunk: Awaited<ReturnType<typeof reader.read>>
      // A body that stops coming (a drip, a stall) ends the transfer after `idleMs`, whatever time is left.
      const idle = setTimeout(() => x.controller.abort(), call.idleMs)
      try {
        chunk = await reader.read()
      } catch {
        x.done()
        return controller.error(readError(x))
      } finally {
        clearTimeout(idle)
      }
      if (chunk.done) {
        x.done()
        return received === length ? controller.close() : controller.error(unavailable(INVALID))
      }
      received += chunk.value.length
      passedOn(chunk.value.length)
      if (received > length) {
        x.controller.abort()
        x.done()
        return controller.error(unavailable(TOO_LARGE))
      }
      controller.enqueue(chunk.value)
    },
    cancel: () => {
      x.controller.abort()
      x.done()
    }
  }, { highWaterMark: 0 })
  return { _tag: "Stream", headers: response.headers, body }
}

/** Waits (until `deadline`) for the agent to bind its socket, adopts it, and asks for its health. */
export const waitForAgent = async (state: JailState, deadline: number, shutdown: AbortSignal, stillStarting: () => boolean) => {
  const pause = backoff()
  while (Date.now() < deadline && stillStarting()) {
    const view = openView(state)
    let adopted = false
    try {
      adopted = adoptSocket(view, AGENT_SOCKET, state.hostUid)
    } finally {
      view.close()
    }
    if (adopted) {
      const answer = await callAgent(state, "/health", { timeoutMs: Math.max(100, deadline - Date.now()), maxBytes: 4096 }, shutdown)
      if (answer.status === 200) return
    }
    await pause()
  }
  throw unavailable("the sandbox agent did not start")
}
