/**
 * How the Daytona emulator runs a session's commands in one shell, as the daemon does (its session is one shell, fed
 * a wrapper per command on its stdin, so `export` and `cd` carry over), and how it tells each command's output
 * apart: the wrapper writes a start marker before the command and an end marker with its exit status after it, on
 * stdout and on stderr, each carrying a random nonce of the command's. The markers are found in the shell's own
 * output as the local runtime keeps it (ordered events on the sandbox's disk): a command's output is what lies
 * between its markers on each stream; what a background job writes outside them belongs to no command (at Daytona
 * the command would not end while it holds the output open).
 *
 * The wrapper, written as one compound command (the command itself is one single-quoted word for `eval`, so nothing
 * in it is read as the wrapper's syntax):
 *
 *   exec 8>&1 9>&2; __dtn_p=<its files' prefix>; printf '\036<nonce>:S\036'; printf … >&2; { eval '<command>'
 *   } </dev/null 1>&8 2>&9 8>&- 9>&-; __dtn_ec=$?; printf '\036<nonce>:E:%d\036' "$__dtn_ec"; printf … >&2;
 *   printf '%d' "$__dtn_ec" > "$__dtn_p.exit"
 *
 * The exit status also goes to a file, after the markers (as the daemon writes its exit code file once its output is
 * flushed): whether a command ended is one small read, whatever it wrote.
 * The command's own redirections are undone after it (`1>&8` saves and restores the shell's stdout, as the daemon's
 * `> "$sp"` does). A synchronous command reads end-of-file; an asynchronous one reads a FIFO the emulator's input
 * route writes to (opened read-write, so it never sees end-of-file, as the daemon's keeps its FIFO open), and, unless
 * the command was started with `suppressInputEcho`, what is sent is echoed to its stdout through a second FIFO, as
 * the daemon echoes input into the log.
 * The wrapper runs as few programs as it can (a program's start is the costly part of a short command here): the
 * synchronous one none, the asynchronous one `mkfifo` and `rm` (and the echo's `cat`), its files side by side under one
 * prefix rather than in a directory of their own (which would take `mkdir` and `rm -r`).
 */
import { shellQuote } from "../adapter/wire.ts"

const RS = 0x1e
const encoder = new TextEncoder()

/** A command's nonce: 16 hex characters from a CSPRNG (a command cannot know a later one's). */
export const newNonce = () => Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex")

/**
 * The prefix of a command's files in the sandbox: its exit status (`.exit`, written once its output is all written),
 * and for an asynchronous command, while it runs, its FIFOs (`.in`, its input; `.echo`, what is sent to it, to its
 * stdout, unless its input echo is suppressed). On the jail's shared-memory tmpfs, not its disk: a command that fills
 * the disk still leaves its exit status.
 */
export const commandFiles = (nonce: string) => `/dev/shm/.daytona-session-${nonce}`
/** Every file a command may leave (removed with its session). */
export const commandFileNames = (nonce: string) => [".exit", ".in", ".echo"].map((suffix) => `${commandFiles(nonce)}${suffix}`)

const startMarker = (nonce: string) => `\\036${nonce}:S\\036`

/** The line written to the session's shell for one command. */
export const wrapperLine = (nonce: string, command: string, options: { readonly async: boolean; readonly echo: boolean }): string => {
  const start = `printf '${startMarker(nonce)}'; printf '${startMarker(nonce)}' >&2;`
  const end = `printf '\\036${nonce}:E:%d\\036' "$__dtn_ec"; printf '\\036${nonce}:E:%d\\036' "$__dtn_ec" >&2; printf '%d' "$__dtn_ec" > "$__dtn_p.exit"`
  const body = `{ eval ${shellQuote(command)}\n}`
  const redirect = "1>&8 2>&9 8>&- 9>&-"
  const setup = `exec 8>&1 9>&2; __dtn_p=${commandFiles(nonce)};`
  if (!options.async) return `${setup} ${start} ${body} </dev/null ${redirect}; __dtn_ec=$?; ${end}\n`
  if (!options.echo) {
    return [
      `${setup} mkfifo "$__dtn_p.in";`,
      `${start} ${body} 0<>"$__dtn_p.in" ${redirect}; __dtn_ec=$?;`,
      `rm -f "$__dtn_p.in"; ${end}\n`
    ].join(" ")
  }
  return [
    `${setup} mkfifo "$__dtn_p.in" "$__dtn_p.echo";`,
    `${start} cat 0<>"$__dtn_p.echo" & __dtn_e=$!;`,
    `${body} 0<>"$__dtn_p.in" ${redirect}; __dtn_ec=$?;`,
    `kill "$__dtn_e" 2>/dev/null; wait "$__dtn_e" 2>/dev/null; rm -f "$__dtn_p.in" "$__dtn_p.echo"; ${end}\n`
  ].join(" ")
}

/**
 * The script the input route runs (argv: the command's files' prefix, "1" to leave out the echo), data on its
 * stdin: written to the echo FIFO, then to the input FIFO, both opened read-write so neither ever blocks on an
 * open. Exit 3: the command is not running (its FIFOs are gone).
 */
export const INPUT_SCRIPT =
  `p=$1; [ -p "$p.in" ] || exit 3; t="$p.input.$$"; cat > "$t" && { [ "$2" = 1 ] || cat "$t" 1<>"$p.echo"; cat "$t" 1<>"$p.in"; }; s=$?; rm -f "$t"; exit $s`

const indexOf = (haystack: Uint8Array, needle: Uint8Array, from = 0) => Buffer.from(haystack.buffer, haystack.byteOffset, haystack.byteLength).indexOf(needle, from)

/** How many bytes at the end of `data` could be the start of `pattern` (a marker cut by an event's end). */
const partialSuffix = (data: Uint8Array, pattern: Uint8Array) => {
  for (let k = Math.min(pattern.length - 1, data.length); k > 0; k--) {
    let match = true
    for (let i = 0; i < k; i++) {
      if (data[data.length - k + i] !== pattern[i]) {
        match = false
        break
      }
    }
    if (match) return k
  }
  return 0
}

/** The longest exit status an end marker carries (`-2147483648`). */
const MAX_STATUS_CHARS = 11

/**
 * One stream of one command: fed the stream's bytes in order, it hands out the command's output (what lies between
 * its markers) and, once past its end marker, its exit status. What it holds back between two calls is at most a
 * marker's length (a marker cut by an event's end).
 */
export class StreamExtract {
  private phase: "before" | "inside" | "after" = "before"
  private carry: Uint8Array = new Uint8Array(0)
  private readonly start: Uint8Array
  private readonly endPrefix: Uint8Array
  exitCode: number | undefined = undefined

  constructor(nonce: string) {
    this.start = encoder.encode(`\x1e${nonce}:S\x1e`)
    this.endPrefix = encoder.encode(`\x1e${nonce}:E:`)
  }

  get ended() {
    return this.phase === "after"
  }

  /** Past its start marker. */
  get started() {
    return this.phase !== "before"
  }

  /** The command's output in `data` (pieces, in order). */
  push(data: Uint8Array): Array<Uint8Array> {
    const out: Array<Uint8Array> = []
    if (this.phase === "after") return out
    let buf = this.carry.length === 0 ? data : Buffer.concat([this.carry, data])
    this.carry = new Uint8Array(0)
    for (;;) {
      if (this.phase === "before") {
        const at = indexOf(buf, this.start)
        if (at < 0) {
          // Not this command's yet: dropped, but for what may be the start of its marker.
          this.carry = buf.slice(buf.length - partialSuffix(buf, this.start))
          return out
        }
        buf = buf.subarray(at + this.start.length)
        this.phase = "inside"
        continue
      }
      const at = indexOf(buf, this.endPrefix)
      if (at < 0) {
        const keep = partialSuffix(buf, this.endPrefix)
        if (buf.length > keep) out.push(buf.subarray(0, buf.length - keep))
        this.carry = buf.slice(buf.length - keep)
        return out
      }
      if (at > 0) out.push(buf.subarray(0, at))
      const rest = buf.subarray(at + this.endPrefix.length)
      const close = rest.indexOf(RS)
      if (close < 0 && rest.length <= MAX_STATUS_CHARS) {
        this.carry = buf.slice(at)
        return out
      }
      const status = close < 0 ? "" : Buffer.from(rest.subarray(0, close)).toString("latin1")
      if (/^-?\d{1,10}$/.test(status)) {
        this.exitCode = Number(status)
        this.phase = "after"
        return out
      }
      // Not a marker after all (a command cannot know its own nonce's end in advance, but may print look-alikes).
      out.push(buf.subarray(at, at + this.endPrefix.length))
      buf = rest
    }
  }
}

/** Both streams of one command. */
export class CommandExtract {
  readonly stdout: StreamExtract
  readonly stderr: StreamExtract
  /** The seq of the event in which each stream's end marker completed. */
  stdoutEndSeq: number | undefined = undefined
  stderrEndSeq: number | undefined = undefined

  constructor(nonce: string) {
    this.stdout = new StreamExtract(nonce)
    this.stderr = new StreamExtract(nonce)
  }

  get ended() {
    return this.stdout.ended && this.stderr.ended
  }

  get exitCode() {
    return this.stdout.exitCode ?? this.stderr.exitCode
  }

  /** The command's pieces of one event of the shell's output. */
  feed(event: { readonly seq: number; readonly type: "stdout" | "stderr"; readonly data: Uint8Array }): Array<{ readonly type: "stdout" | "stderr"; readonly data: Uint8Array }> {
    const stream = event.type === "stdout" ? this.stdout : this.stderr
    const wasEnded = stream.ended
    const pieces = stream.push(event.data).map((data) => ({ type: event.type, data }))
    if (!wasEnded && stream.ended) {
      if (event.type === "stdout") this.stdoutEndSeq = event.seq
      else this.stderrEndSeq = event.seq
    }
    return pieces
  }
}

/** The daemon's labels of its log (common-go/pkg/log): each piece of output prefixed by its stream's. */
export const STDOUT_PREFIX = Buffer.from([1, 1, 1])
export const STDERR_PREFIX = Buffer.from([2, 2, 2])
export const labelled = (piece: { readonly type: "stdout" | "stderr"; readonly data: Uint8Array }) =>
  Buffer.concat([piece.type === "stdout" ? STDOUT_PREFIX : STDERR_PREFIX, piece.data])
