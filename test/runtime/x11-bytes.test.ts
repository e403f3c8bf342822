/**
 * The desktop agent's X11 reader (src/runtime/agent/x11.ts, ByteQueue): what the display sends arrives in pieces
 * that need not line up with its packets, and every byte must be read once, in order. Dropping the pieces behind
 * one that ended exactly at a packet's end put the reader out of step with the display: under CI load, where
 * several packets wait at once, screenshots failed with "the display sent a short image" and actions with "the
 * display refused a request (error 0)".
 */
import { describe, expect, it } from "vitest"
import { ByteQueue } from "../../src/runtime/agent/x11.ts"

const bytes = (from: number, length: number) => Buffer.from(Array.from({ length }, (_, i) => (from + i) % 256))

describe("the X11 reader's queue of bytes", () => {
  it("a piece that ends at a packet's end leaves the pieces behind it in place", () => {
    const q = new ByteQueue()
    q.push(bytes(0, 32))
    q.push(bytes(32, 32))
    q.push(bytes(64, 40))
    expect([...q.take(32)]).toEqual([...bytes(0, 32)])
    expect(q.length).toBe(72)
    expect([...q.take(32)]).toEqual([...bytes(32, 32)])
    expect([...q.take(40)]).toEqual([...bytes(64, 40)])
    expect(q.length).toBe(0)
  })

  it("a packet over several pieces is joined whole; what follows it stays", () => {
    const q = new ByteQueue()
    q.push(bytes(0, 10))
    q.push(bytes(10, 30))
    q.push(bytes(40, 5))
    expect(q.peek(32).length).toBeGreaterThanOrEqual(32)
    expect([...q.take(32)]).toEqual([...bytes(0, 32)])
    expect([...q.take(13)]).toEqual([...bytes(32, 13)])
    expect(q.length).toBe(0)
  })

  it("in any cut of the same stream, the packets come out the same", () => {
    const stream = bytes(7, 1000)
    const packets = [32, 32, 100, 32, 804]
    for (const size of [1, 7, 32, 33, 64, 500, 1000]) {
      const q = new ByteQueue()
      for (let at = 0; at < stream.length; at += size) q.push(stream.subarray(at, at + size))
      let at = 0
      for (const n of packets) {
        expect([...q.take(n)], `pieces of ${size}`).toEqual([...stream.subarray(at, at + n)])
        at += n
      }
      expect(q.length).toBe(0)
    }
  })

  it("asked for more than there is, it gives what there is", () => {
    const q = new ByteQueue()
    q.push(bytes(0, 5))
    expect(q.take(32).length).toBe(5)
    expect(q.length).toBe(0)
    expect(q.take(1).length).toBe(0)
  })
})
