import { describe, expect, it } from "vitest"
import { multipartFile, multipartParts } from "./multipart.ts"

const B = "XyZ"
const form = (parts: Array<{ name: string; fileName?: string; body: string }>, closed = true) =>
  parts.map((p) => `--${B}\r\nContent-Disposition: form-data; name="${p.name}"${p.fileName === undefined ? "" : `; filename="${p.fileName}"`}\r\n\r\n${p.body}\r\n`).join("") +
  (closed ? `--${B}--\r\n` : "")

/** A body sent in small pieces, so delimiters fall across reads. */
const inPieces = (text: string, size = 3) =>
  new ReadableStream<Uint8Array>({
    start: (c) => {
      const bytes = new TextEncoder().encode(text)
      for (let i = 0; i < bytes.length; i += size) c.enqueue(bytes.slice(i, i + size))
      c.close()
    }
  })

describe("multipart", () => {
  it("multipartFile streams the named part only, however the body is cut", async () => {
    const body = form([{ name: "path", body: "/x" }, { name: "file", fileName: "a.bin", body: "line\r\n--Xy not a boundary" }, { name: "after", body: "z" }])
    expect(await new Response(multipartFile(inPieces(body), B, "file")).text()).toBe("line\r\n--Xy not a boundary")
  })

  it("multipartFile errors on a body without the part, or one that ends before the part's end", async () => {
    await expect(new Response(multipartFile(inPieces(form([{ name: "other", body: "x" }])), B, "file")).text()).rejects.toThrow('no "file" part')
    const cut = form([{ name: "file", body: "partial" }]).slice(0, -12)
    await expect(new Response(multipartFile(inPieces(cut), B, "file")).text()).rejects.toThrow("ended before its closing boundary")
  })

  it("multipartParts yields every part with its names; a part left unread is skipped", async () => {
    const seen: Array<[string | undefined, string | undefined, string]> = []
    for await (const part of multipartParts(inPieces(form([{ name: "a", body: "1" }, { name: "b", fileName: "f", body: "22" }, { name: "c", body: "333" }])), B)) {
      seen.push([part.name, part.fileName, part.name === "b" ? "(unread)" : await new Response(part.body).text()])
    }
    expect(seen).toEqual([["a", undefined, "1"], ["b", "f", "(unread)"], ["c", undefined, "333"]])
  })
})
