/** The network counters parser: kernel text in, bytes out; anything that is not the kernel's format is refused. */
import { describe, expect, it } from "vitest"
import { parseNetDev } from "../../src/runtime/Metrics.ts"

const HEADER = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"

describe("parseNetDev", () => {
  it("sums every interface but loopback", () => {
    const text = `${HEADER}    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0\n  tap0:  52000     40    0    0    0     0          0         0     7300      35    0    0    0     0       0          0\n`
    expect(parseNetDev(text)).toEqual({ rx: 52000, tx: 7300 })
    expect(parseNetDev(`${HEADER}    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n`)).toEqual({ rx: 0, tx: 0 })
  })
  it("refuses lines that are not counters", () => {
    expect(parseNetDev(`${HEADER}  tap0: 1 2 3\n`)).toBeNull()
    expect(parseNetDev(`${HEADER}  tap0: -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n`)).toBeNull()
    expect(parseNetDev(`${HEADER}  tap0: 1e400 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n`)).toBeNull()
  })
})
