/** `sandbox cp`: a file of any size between this machine and a sandbox, with a progress bar on a terminal. */
import * as fs from "node:fs"
import * as path from "node:path"
import { UsageError } from "./args.ts"
import type { CliIo, SandboxCommand } from "./io.ts"

/** `sbx_…:/path`: a path in a sandbox. */
const sandboxPath = (arg: string) => {
  const m = /^(sbx_[A-Za-z0-9]+):(\/.*)$/.exec(arg)
  return m === null ? undefined : { id: m[1]!, path: m[2]! }
}

/** A progress bar on stderr when it is a terminal (redrawn at most ten times a second), nothing otherwise. */
const progressBar = (io: CliIo, label: string) => {
  let last = 0
  let total: number | undefined
  const mib = (n: number) => (n / 1048576).toFixed(1)
  const draw = (done: number, final: boolean) => {
    if (!io.errIsTty) return
    const now = Date.now()
    if (!final && now - last < 100) return
    last = now
    const width = 30
    const filled = total === undefined ? 0 : total === 0 ? width : Math.min(width, Math.round((done / total) * width))
    io.err(`\r${label} [${"#".repeat(filled)}${" ".repeat(width - filled)}] ${mib(done)}/${total === undefined ? "?" : mib(total)} MiB${final ? "\n" : ""}`)
  }
  return {
    update: (done: number, size?: number) => {
      if (size !== undefined) total = size
      draw(done, false)
    },
    finish: (done: number) => {
      total ??= done
      draw(done, true)
    }
  }
}

export const copy = async ({ io, gw, args, print }: SandboxCommand): Promise<number> => {
  const [from, to] = args
  if (from === undefined || to === undefined) throw new UsageError("cp needs a source and a destination")
  const remoteFrom = sandboxPath(from)
  const remoteTo = sandboxPath(to)
  if ((remoteFrom === undefined) === (remoteTo === undefined)) throw new UsageError("cp copies between this machine and a sandbox: one side is <id>:/path")
  if (remoteTo !== undefined) {
    const size = fs.statSync(from).size
    // A directory as the destination (a trailing /) takes the file's own name.
    const target = remoteTo.path.endsWith("/") ? `${remoteTo.path}${path.basename(from)}` : remoteTo.path
    const bar = progressBar(io, `→ ${remoteTo.id}:${target}`)
    bar.update(0, size)
    const written = await (await gw.sandboxes.get(remoteTo.id)).files.upload(target, fs.createReadStream(from, { highWaterMark: 1024 * 1024 }), {
      onProgress: (sent) => bar.update(sent)
    })
    bar.finish(written.sizeBytes)
    print({ from, to: `${remoteTo.id}:${target}`, size_bytes: written.sizeBytes, pieces: written.pieces }, `${written.sizeBytes} bytes → ${remoteTo.id}:${target}`)
  } else {
    const source = remoteFrom!
    // A local directory as the destination takes the file's own name.
    const target = fs.existsSync(to) && fs.statSync(to).isDirectory() ? path.join(to, path.posix.basename(source.path)) : to
    const sandbox = await gw.sandboxes.get(source.id)
    const bar = progressBar(io, `← ${from}`)
    // Written beside the target and renamed at the end: a broken copy leaves no half file under its name.
    const partial = `${target}.${process.pid}.part`
    const fd = fs.openSync(partial, "w", 0o644)
    let received = 0
    try {
      for await (const chunk of sandbox.files.download(source.path, { onProgress: (done, total) => bar.update(done, total) })) {
        for (let at = 0; at < chunk.length;) at += fs.writeSync(fd, chunk, at)
        received += chunk.length
      }
      fs.closeSync(fd)
      fs.renameSync(partial, target)
    } catch (e) {
      fs.closeSync(fd)
      fs.rmSync(partial, { force: true })
      throw e
    }
    bar.finish(received)
    print({ from, to: target, size_bytes: received }, `${received} bytes ← ${from}`)
  }
  return 0
}
