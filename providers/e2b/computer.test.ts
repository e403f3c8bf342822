/**
 * E2B's computer use against a scripted HttpClient: the envd commands the adapter sends (the wire of E2B's Desktop
 * SDK: `bash -l -c` with DISPLAY=:0), what it makes of their output, and what it refuses before sending anything.
 * The same driver runs end to end on the emulator in test/e2e/computer-use.test.ts.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { bodyBytes, bodyJson, type Call, json, scripted, type Step } from "../testing/scripted-client.ts"
import type { ProviderSandbox } from "../../src/providers/Provider.ts"
import { makeE2BProvider } from "./adapter/index.ts"
import { encodeEnvelope, END_STREAM, EnvelopeDecoder } from "./connect.ts"

const SANDBOX: ProviderSandbox = {
  resourceId: "isbx1",
  resolvedResources: { vcpu: 2, memoryMb: 512, diskMb: 1024, architecture: "x86_64", providerSize: "desktop" },
  metadata: { templateID: "desktop", envdVersion: "0.5.7", timeoutSeconds: 900 }
}
const detail = { templateID: "desktop", sandboxID: "isbx1", clientID: "c", startedAt: "2026-11-22T10:00:00.000Z", endAt: "2026-11-22T10:15:00.000Z", cpuCount: 2, memoryMB: 512, metadata: {}, state: "running", envdVersion: "0.5.7", envdAccessToken: "tok-1" }
const b64 = (s: string) => Buffer.from(s).toString("base64")
const commandStream = (stdout: string, exitCode = 0) =>
  new Response(
    new Uint8Array([
      ...encodeEnvelope({ event: { start: { pid: 7 } } }),
      ...(stdout === "" ? [] : encodeEnvelope({ event: { data: { stdout: b64(stdout) } } })),
      ...encodeEnvelope({ event: { end: { ...(exitCode === 0 ? {} : { exitCode }), exited: true } } }),
      ...encodeEnvelope({}, END_STREAM)
    ]),
    { headers: { "content-type": "application/connect+json" } }
  )
/** A command step: checks its script (and the SDK's shell and display), answers its output. */
/** `timeoutMs` null: a background command, which envd runs with no deadline. */
const command = (script: string | RegExp, stdout: string, exitCode = 0, timeoutMs: string | null = "60000"): Step => ({
  method: "POST",
  path: "/process.Process/Start",
  reply: (call: Call) => {
    const [body] = new EnvelopeDecoder().push(bodyBytes(call)).map((e) => e.message) as Array<{ process: { cmd: string; args: Array<string>; envs: Record<string, string> } }>
    expect(body!.process.cmd).toBe("/bin/bash")
    expect(body!.process.args.slice(0, 2)).toEqual(["-l", "-c"])
    if (typeof script === "string") expect(body!.process.args[2]).toBe(script)
    else expect(body!.process.args[2]).toMatch(script)
    expect(body!.process.envs).toEqual({ DISPLAY: ":0" })
    expect(call.headers["connect-timeout-ms"]).toBe(timeoutMs ?? undefined)
    return commandStream(stdout, exitCode)
  }
})
const provider = (steps: Array<Step>) => {
  const s = scripted([{ method: "GET", path: "/sandboxes/isbx1", reply: () => json(detail) }, ...steps])
  return { s, p: makeE2BProvider({ apiUrl: "https://api.e2b.test", sandboxUrl: "https://sandbox.e2b.test", apiKey: "e2b_0123", mode: "remote", httpClient: s.client }) }
}
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const failure = <A>(effect: Effect.Effect<A, { readonly kind: string; readonly message: string }>) => Effect.runPromise(Effect.flip(effect))
const removed = (call: Call, path: string) => {
  expect(bodyJson(call)).toEqual({ path })
  return json({})
}
const GEOMETRY = command("xdotool getdisplaygeometry", "1280 800\n")

describe("e2b computer use: envd commands", () => {
  it("a create asking for computer use is of the desktop template; its display is started as the SDK starts it, or the sandbox goes", async () => {
    const startOf = (created: boolean) => [
      { method: "POST", path: "/process.Process/List", reply: () => json({ processes: [] }) },
      command("Xvfb :0 -ac -screen 0 1280x800x24 -retro -dpi 96 -nolisten tcp -nolisten unix", "", 0, null),
      command(/^for i in \$\(seq 100\); do xdpyinfo -display :0 /, "", created ? 0 : 1)
    ] as Array<Step>
    const createSteps = [
      { method: "GET", path: "/v2/sandboxes", reply: () => json([]) },
      {
        method: "POST",
        path: "/v2/sandboxes",
        reply: (call: Call) => {
          expect((bodyJson(call) as { templateID: string }).templateID).toBe("desktop")
          return json(detail, 201)
        }
      },
      { method: "GET", path: "/sandboxes/isbx1", reply: () => json(detail) }
    ]
    const s = scripted([
      ...createSteps,
      ...startOf(true),
      command("startxfce4", "", 0, null),
      GEOMETRY,
      // A template without a display: the sandbox is removed and the create fails, saying why.
      ...createSteps,
      ...startOf(false),
      { method: "DELETE", path: "/sandboxes/isbx1", reply: () => new Response(null, { status: 204 }) }
    ])
    const p = makeE2BProvider({ apiUrl: "https://api.e2b.test", sandboxUrl: "https://sandbox.e2b.test", apiKey: "e2b_0123", mode: "remote", httpClient: s.client })
    const input = {
      sandboxId: "sbx_1",
      organizationId: "00000000-0000-4000-8000-000000000000",
      projectId: "prj_1",
      source: { kind: "environment", environment: "metal/base", version: "latest" },
      resources: { vcpu: 1, memoryMb: 512, architecture: "any" },
      lifecycle: { runtimeTimeoutSeconds: 600, onRuntimeTimeout: "destroy", onIdleTimeout: "destroy" },
      providerOptions: {},
      environment: {},
      metadata: {},
      computerUse: true
    } as const
    expect((await run(p.create(input))).resourceId).toBe("isbx1")
    const failed = await failure(p.create(input))
    expect(failed.kind).toBe("unsupported")
    expect(failed.message).toContain("e2b sandbox has no desktop: its display server did not start")
    expect(s.left()).toBe(0)
  })

  it("an action is one xdotool chained with getmouselocation; a point off the screen is refused before anything runs", async () => {
    const { s, p } = provider([
      GEOMETRY,
      command("xdotool mousemove 300 160 click --repeat 2 3 getmouselocation", "x:300 y:160 screen:0 window:4194\n"),
      // Typing goes in pieces, each within 30 s at envd.
      command("xdotool type --delay 5 -- 'it'\"'\"'s' && xdotool getmouselocation", "x:300 y:160 screen:0 window:4194\n", 0, "30000"),
      command("xdotool key -- 'ctrl+super+Return' getmouselocation", "x:300 y:160 screen:0 window:4194\n"),
      command("xdotool key -- 'nope' getmouselocation", "", 1)
    ])
    expect(await run(p.computer!.action(SANDBOX, { type: "mouse_click", x: 300, y: 160, button: "right", double: true }))).toEqual({ cursor: { x: 300, y: 160 } })
    expect((await failure(p.computer!.action(SANDBOX, { type: "mouse_move", x: 1280, y: 0 }))).kind).toBe("invalid_request")
    expect(await run(p.computer!.action(SANDBOX, { type: "keyboard_type", text: "it's", delay_ms: 5 }))).toEqual({ cursor: { x: 300, y: 160 } })
    expect(await run(p.computer!.action(SANDBOX, { type: "keyboard_key", key: "Return", modifiers: ["ctrl", "cmd"] }))).toEqual({ cursor: { x: 300, y: 160 } })
    // A command that fails is the desktop refusing.
    expect((await failure(p.computer!.action(SANDBOX, { type: "keyboard_hotkey", keys: "nope" }))).kind).toBe("invalid_request")
    expect(s.left()).toBe(0)
  })

  it("a screenshot is scrot into a file, read back through /files and removed; an image not of the format asked for is refused", async () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3])
    let file = ""
    const { s, p } = provider([
      GEOMETRY,
      command(/^scrot -o -z --pointer --autoselect 10,20,400,200 --quality 60 --thumb 200x100 \/tmp\/sgw-screenshot-[0-9a-f-]{36}\.jpg && xdotool getmouselocation$/, "x:5 y:6\n"),
      {
        method: "GET",
        path: "/files",
        reply: (call) => {
          file = call.url.searchParams.get("path") ?? ""
          expect(file).toMatch(/^\/tmp\/sgw-screenshot-[0-9a-f-]{36}-thumb\.jpg$/)
          return new Response(png)
        }
      },
      // Both files go: scrot's and its thumbnail.
      { method: "POST", path: "/filesystem.Filesystem/Remove", reply: (call) => removed(call, file.replace("-thumb", "")) },
      { method: "POST", path: "/filesystem.Filesystem/Remove", reply: (call) => removed(call, file) },
    ])
    const refused = await failure(p.computer!.screenshot(SANDBOX, { format: "jpeg", showCursor: true, quality: 60, scale: 0.5, region: { x: 10, y: 20, width: 400, height: 200 } }))
    expect(refused.message).toContain("not the jpeg image asked for")
    expect(file).not.toBe("")
    for (let i = 0; i < 100 && s.left() > 0; i++) await Bun.sleep(10) // the removal runs on after the answer
    expect(s.left()).toBe(0)
  })
})
