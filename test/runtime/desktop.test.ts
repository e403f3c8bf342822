/**
 * The desktop in a real jail (computer use): a display of the sandbox's own with a window manager, input through
 * xdotool, screenshots straight from the X server, recordings with ffmpeg — all inside the jail.
 */
import * as fs from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { RuntimeError } from "../../src/runtime/LocalRuntime.ts"
import { failure, newRuntime, run, sh } from "./support.ts"

const { rt, cleanup } = newRuntime("desktop")
const kind = async (effect: Parameters<typeof failure>[0]) => ((await failure(effect)) as RuntimeError).kind

beforeAll(async () => {
  await run(rt.create({ id: "d", vcpu: 1, memoryMb: 512, internet: false, env: { DISPLAY: ":1" } }))
})
afterAll(cleanup)

describe("desktop", () => {
  it("starts a display inside the jail, idempotently, with its socket in the jail's own /tmp", async () => {
    expect(await kind(rt.screenshot("d", { format: "png", showCursor: false }))).toBe("conflict")
    const info = await run(rt.startDesktop("d", { width: 800, height: 600 }))
    expect(info).toMatchObject({ width: 800, height: 600 })
    expect(await run(rt.startDesktop("d", { width: 1024, height: 768 }))).toMatchObject({ width: 800, height: 600 })
    expect((await sh(rt, "d", "ls /tmp/.X11-unix")).stdout).toBe("X1\n")
    // No TCP listener for X (6000+n), in the jail's own network namespace either.
    expect((await sh(rt, "d", "cat /proc/net/tcp /proc/net/tcp6 | awk '{print $2}' | grep -ci ':1771' || true")).stdout.trim()).toBe("0")
    expect(fs.existsSync("/tmp/.X11-unix/X1") && fs.statSync("/tmp/.X11-unix/X1").uid !== 0).toBe(false)
  })

  it("serves its live view (noVNC) on a port of the jail's own loopback, reached through the port bridge", async () => {
    const info = await run(rt.startDesktop("d", { width: 800, height: 600 }))
    expect(info.liveViewPort).toBe(6080)
    let page = ""
    for (let i = 0; i < 100 && !page.includes("noVNC"); i++) {
      const socket = await run(rt.connectPort("d", 6080)).catch(() => undefined)
      if (socket !== undefined) {
        page = await new Promise<string>((resolve) => {
          let text = ""
          socket.on("data", (b: Buffer) => (text += b.toString("latin1")))
          socket.on("close", () => resolve(text))
          socket.on("error", () => resolve(text))
          socket.resume()
          socket.write("GET /vnc.html HTTP/1.0\r\nHost: x\r\n\r\n")
        })
      }
      if (!page.includes("noVNC")) await Bun.sleep(100)
    }
    expect(page).toContain("noVNC")
  })

  it("types into a window and the screenshot shows it", async () => {
    await run(rt.exec("d", { command: ["xterm", "-geometry", "60x10+40+40", "-fa", "Monospace", "-fs", "14"], maxOutputBytes: 4096 }))
    // Wait for the window to be mapped (xdotool search answers once it is).
    for (let i = 0; i < 100; i++) {
      if ((await sh(rt, "d", "xdotool search --onlyvisible --class xterm || true")).stdout.trim() !== "") break
      await Bun.sleep(100)
    }
    const before = await run(rt.screenshot("d", { format: "png", showCursor: false }))
    expect(before).toMatchObject({ format: "png", width: 800, height: 600 })
    await run(rt.desktopAction("d", { type: "mouse_click", x: 200, y: 100, button: "left", double: false }))
    await run(rt.desktopAction("d", { type: "keyboard_type", text: "echo hello-desktop", delay_ms: 5 }))
    const after = await run(rt.screenshot("d", { format: "png", showCursor: true }))
    expect(Buffer.from(after.data).equals(Buffer.from(before.data))).toBe(false)
    fs.writeFileSync("/tmp/cu-exp/after.png", after.data)
    const jpeg = await run(rt.screenshot("d", { format: "jpeg", quality: 50, scale: 0.5, showCursor: false, region: { x: 0, y: 0, width: 400, height: 300 } }))
    expect(jpeg).toMatchObject({ format: "jpeg", width: 200, height: 150 })
    // Outside the screen: refused by the agent, not clamped.
    expect(await kind(rt.desktopAction("d", { type: "mouse_move", x: 800, y: 10 }))).toBe("invalid")
  })

  it("records the desktop to an mp4", async () => {
    const started = await run(rt.startRecording("d"))
    for (let i = 0; i < 100 && (await run(rt.recording("d", started.id))).state === "starting"; i++) await Bun.sleep(100)
    expect((await run(rt.recording("d", started.id))).state).toBe("recording")
    await Bun.sleep(2000)
    const stopped = await run(rt.stopRecording("d", started.id))
    expect(stopped.state).toBe("stopped")
    const file = await run(rt.readFile("d", stopped.path, 0, 50 << 20))
    expect(Buffer.from(file.data.subarray(4, 8)).toString("latin1")).toBe("ftyp")
    fs.writeFileSync("/tmp/cu-exp/rec.mp4", file.data)
  })
})
