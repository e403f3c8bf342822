/** Compression bombs for hostile tests: what a sandbox may send the gateway to make it inflate. */
import * as zlib from "node:zlib"

/** The size a gzip bomb inflates to: 900 MiB of zeros. */
export const BOMB_INFLATED_BYTES = 900 * 1024 * 1024

let made: Promise<Buffer> | undefined

/** 900 MiB of zeros, gzipped (~0.9 MB, one gzip member), a MiB at a time; made once per test file. */
export const gzipBomb = (): Promise<Buffer> =>
  (made ??= (async () => {
    const gzip = zlib.createGzip({ level: 9 })
    const out: Array<Buffer> = []
    gzip.on("data", (chunk: Buffer) => out.push(chunk))
    const ended = new Promise((resolve) => gzip.on("end", resolve))
    const zeros = Buffer.alloc(1024 * 1024)
    for (let i = 0; i < BOMB_INFLATED_BYTES / zeros.length; i++) if (!gzip.write(zeros)) await new Promise((resolve) => gzip.once("drain", resolve))
    gzip.end()
    await ended
    return Buffer.concat(out)
  })())
