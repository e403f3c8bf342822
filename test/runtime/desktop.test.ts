/**
 * The desktop in a real jail (computer use): a display of the sandbox's own, on a socket in the jail's own /tmp,
 * screenshots straight from the X server. Typing, windows, recordings and the live view are tested end to end
 * (test/e2e/computer-use.test.ts).
 */
import * as fs from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { RuntimeError } from "../../src/runtime/LocalRuntime.ts"
import * as path from "node:path"
import { cgroupDir, failure, newRuntime, run, sh } from "./support.ts"

const { rt, dataDir, cleanup } = newRuntime("desktop")
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
    // The display server and the window manager count against the sandbox as its commands do: in the commands'
    // memory and process cgroups (not the agent's), and the jail's CPU cgroup.
    for (const [controller, file] of [["pids", "work/cgroup.procs"], ["memory", "work/cgroup.procs"], ["cpu", "cgroup.procs"]] as const) {
      const procs = fs.readFileSync(path.join(cgroupDir(controller, dataDir, "d"), file), "utf8").split("\n").filter(Boolean)
      const names = procs.map((pid) => {
        try {
          return fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim()
        } catch {
          return ""
        }
      })
      expect(names.some((n) => n === "Xvnc" || n === "Xvfb"), `${controller}: ${names.join(", ")}`).toBe(true)
      expect(names, controller).toContain("openbox")
    }
  })

  it("takes screenshots as asked: png of the screen, a jpeg region scaled; refuses what lies outside the screen", async () => {
    const png = await run(rt.screenshot("d", { format: "png", showCursor: true }))
    expect(png).toMatchObject({ format: "png", width: 800, height: 600 })
    const jpeg = await run(rt.screenshot("d", { format: "jpeg", quality: 50, scale: 0.5, showCursor: false, region: { x: 0, y: 0, width: 400, height: 300 } }))
    expect(jpeg).toMatchObject({ format: "jpeg", width: 200, height: 150 })
    expect(await kind(rt.screenshot("d", { format: "png", showCursor: false, region: { x: 700, y: 0, width: 200, height: 10 } }))).toBe("invalid")
    expect(await kind(rt.desktopAction("d", { type: "mouse_move", x: 800, y: 10 }))).toBe("invalid")
    expect(await run(rt.desktopAction("d", { type: "mouse_move", x: 10, y: 20 }))).toEqual({ cursor: { x: 10, y: 20 } })
  })

  it("screenshots taken while the pointer moves share the display's connection: each call gets its own answer", async () => {
    const moves = Array.from({ length: 12 }, (_, i) => run(rt.desktopAction("d", { type: "mouse_move", x: 100 + i, y: 30 + i })))
    const shots = Array.from({ length: 6 }, () => run(rt.screenshot("d", { format: "png", showCursor: true, region: { x: 0, y: 0, width: 64, height: 64 } })))
    expect(await Promise.all(moves)).toEqual(Array.from({ length: 12 }, (_, i) => ({ cursor: { x: 100 + i, y: 30 + i } })))
    for (const shot of await Promise.all(shots)) expect(shot).toMatchObject({ format: "png", width: 64, height: 64 })
  })
})
