/** `sandbox <verb> …`: the sandbox commands, each on the typed client (`cp` and `shell` in their own files). */
import * as fs from "node:fs"
import { integer, UsageError } from "./args.ts"
import { copy } from "./copy.ts"
import { processExitCode, type SandboxCommand } from "./io.ts"
import { shell } from "./shell.ts"

export const sandboxCommand = async (command: SandboxCommand): Promise<number> => {
  const { io, gw, verb, args, flags, rest, json, print, needId } = command
  switch (verb) {
    case "create": {
      const image = flags["image"]
      const sandbox = await gw.sandboxes.create({
        source: typeof image === "string"
          ? { kind: "oci_image", image }
          : { kind: "environment", environment: typeof flags["environment"] === "string" ? flags["environment"] : "metal/base" },
        // The smallest common size (1 vCPU, 512 MB): every provider's smallest sandbox covers it (E2B's base template
        // has 512 MB, and a provider never gives less than asked).
        resources: { vcpu: integer(flags, "vcpu") ?? 1, memory_mb: integer(flags, "memory-mb") ?? 512 },
        lifecycle: { runtime_timeout_seconds: integer(flags, "timeout-seconds") ?? 3600 },
        ...(typeof flags["provider"] === "string" ? { provider: flags["provider"] as never } : {}),
        // On a provider with terminals (for `shell`), with a desktop (computer use).
        ...(flags["pty"] === true || flags["computer-use"] === true
          ? { features: { ...(flags["pty"] === true ? { pty: true } : {}), ...(flags["computer-use"] === true ? { computer_use: true } : {}) } }
          : {})
      }, { wait: flags["no-wait"] !== true })
      print(sandbox.record, `${sandbox.id} ${sandbox.record.state}${sandbox.record.provider === null ? "" : ` on ${sandbox.record.provider}`}`)
      return 0
    }
    case "environments": {
      const environments = await gw.environments.list()
      print({ environments }, environments.map((e) => `${e.name.padEnd(14)} ${e.versions.join(", ").padEnd(8)} ${e.providers.join(", ")}`).join("\n"))
      return 0
    }
    case "list": {
      const page = await gw.sandboxes.list({ limit: 100 })
      print(page, page.sandboxes.map((s) => `${s.id}  ${s.state.padEnd(9)} ${s.provider ?? "-"}`).join("\n"))
      return 0
    }
    case "get": {
      const sandbox = await gw.sandboxes.get(needId())
      print(sandbox.record, JSON.stringify(sandbox.record, null, 2))
      return 0
    }
    case "exec": {
      const id = needId()
      if (rest === undefined || rest.length === 0) throw new UsageError("exec needs a command after --")
      const sandbox = await gw.sandboxes.get(id)
      const result = await sandbox.exec(rest, {
        ...(typeof flags["cwd"] === "string" ? { cwd: flags["cwd"] } : {}),
        ...(io.stdin !== undefined ? { stdin: io.stdin } : {}),
        ...(json ? {} : { onOutput: (stream: "stdout" | "stderr", text: string) => (stream === "stdout" ? io.out(text) : io.err(text)) })
      })
      if (json) print(result, "")
      return processExitCode(result.state, result.exitCode)
    }
    case "shell":
      return shell(command)
    case "cp":
      return copy(command)
    case "expose": {
      const id = needId()
      const port = Number(args[1])
      if (!Number.isSafeInteger(port) || port < 1 || port > 65535) throw new UsageError("expose needs a port from 1 to 65535")
      const lease = integer(flags, "lease-seconds")
      const endpoint = await (await gw.sandboxes.get(id)).expose(port, lease === undefined ? {} : { leaseSeconds: lease })
      print(endpoint, endpoint.url)
      return 0
    }
    case "screenshot": {
      const format = flags["format"] ?? "png"
      if (format !== "png" && format !== "jpeg") throw new UsageError("--format is png or jpeg")
      const shot = await (await gw.sandboxes.get(needId())).computer.screenshot({ format })
      const out = typeof flags["out"] === "string" ? flags["out"] : `screenshot.${format === "png" ? "png" : "jpg"}`
      fs.writeFileSync(out, shot.data)
      print({ path: out, format: shot.format, size_bytes: shot.data.length, cursor_position: shot.cursor }, `${out} (${shot.data.length} bytes)`)
      return 0
    }
    case "click": {
      const id = needId()
      const [x, y] = [Number(args[1]), Number(args[2])]
      if (!Number.isSafeInteger(x) || !Number.isSafeInteger(y) || x < 0 || y < 0) throw new UsageError("click needs the x and y of a point on the screen")
      const button = flags["button"] ?? "left"
      if (button !== "left" && button !== "right" && button !== "middle") throw new UsageError("--button is left, right or middle")
      const done = await (await gw.sandboxes.get(id)).computer.click(x, y, { button, double: flags["double"] === true })
      print(done, `clicked ${button} at ${x},${y}`)
      return 0
    }
    case "type":
    case "key": {
      const id = needId()
      const text = args[1]
      if (text === undefined || args.length > 2) throw new UsageError(verb === "type" ? "type needs the text, as one argument" : "key needs the keys (ctrl+c, Return), as one argument")
      const computer = (await gw.sandboxes.get(id)).computer
      const done = verb === "type" ? await computer.type(text) : await computer.hotkey(text)
      print(done, verb === "type" ? `typed ${text.length} characters` : `pressed ${text}`)
      return 0
    }
    case "live-view": {
      const lease = integer(flags, "lease-seconds")
      const view = await (await gw.sandboxes.get(needId())).computer.liveView(lease === undefined ? {} : { leaseSeconds: lease })
      print({ url: view.url, endpoint: view.endpoint }, view.url)
      return 0
    }
    case "pause":
    case "resume":
    case "rm": {
      const sandbox = await gw.sandboxes.get(needId())
      const operation = await (verb === "rm" ? sandbox.destroy() : sandbox[verb]())
      print(operation, `${sandbox.id} ${verb === "rm" ? "destroyed" : verb === "pause" ? "paused" : "resumed"}`)
      return 0
    }
    default:
      throw new UsageError(`unknown command: sandbox ${verb}`)
  }
}
