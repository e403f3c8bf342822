/**
 * A finished process's kept output in one piece, for a run-and-wait answer (`?wait_seconds`): each stream read
 * from its stored events, up to a cap (the events keep everything, up to the process's max_output_bytes).
 */
import { Effect } from "effect"
import { ProcessesRepo } from "../../db/repos/Processes.ts"
import type { ProcessId } from "../../domain/Ids.ts"

/** Events read per query. */
const PAGE = 64

export interface KeptOutput {
  readonly stdout: Uint8Array
  readonly stderr: Uint8Array
  /** Whether the cap cut either stream. */
  readonly capped: boolean
}

const readStream = (processId: ProcessId, stream: "stdout" | "stderr", capBytes: number) =>
  Effect.gen(function*() {
    const pieces: Array<Buffer> = []
    let size = 0
    let after = 0
    for (;;) {
      const rows = yield* ProcessesRepo.outputAfter(processId, stream, after, PAGE)
      for (const row of rows) {
        after = row.seq
        const data = row.data["data_base64"]
        const bytes = typeof data === "string" ? Buffer.from(data, "base64") : Buffer.alloc(0)
        if (size + bytes.length > capBytes) {
          pieces.push(bytes.subarray(0, capBytes - size))
          return { bytes: Buffer.concat(pieces), capped: true }
        }
        pieces.push(bytes)
        size += bytes.length
      }
      if (rows.length < PAGE) return { bytes: Buffer.concat(pieces), capped: false }
    }
  })

/** Both streams of a process, each at most `capBytes`. */
export const keptOutput = (processId: ProcessId, capBytes: number): Effect.Effect<KeptOutput, never, ProcessesRepo> =>
  Effect.map(
    Effect.all([readStream(processId, "stdout", capBytes), readStream(processId, "stderr", capBytes)]),
    ([stdout, stderr]) => ({ stdout: stdout.bytes, stderr: stderr.bytes, capped: stdout.capped || stderr.capped })
  )
