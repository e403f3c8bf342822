/**
 * The bridge emulator's sandboxes: `POST /v1/sandbox` (no body; an `Idempotency-Key` already used answers the same
 * sandbox), `GET /v1/sandbox/{id}/running` and `DELETE /v1/sandbox/{id}` (404 for an unknown id). Each sandbox is
 * one jail of the local runtime, sized as the bridge's one instance type is (a real bridge's size is set at its
 * deploy, in wrangler.toml), and reaching the internet as a Cloudflare container does.
 */
import { Option } from "effect"
import * as crypto from "node:crypto"
import { defaultInternetOf, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import { jailLabels } from "../../../src/providers/jailLabels.ts"
import type { Books, EmulatedSandbox } from "./books.ts"
import { HttpFailure, json } from "./http.ts"

/** The emulated bridge's instance type (its jails' size): `standard-2`, as the shipped wrangler.toml (1 vCPU, 6 GiB, 12 GB). */
export const INSTANCE = { vcpu: 1, memoryMb: 6144, diskMb: 12_288 } as const
const MAX_KEY_LENGTH = 256

export const makeControl = (books: Books, runtime: LocalRuntimeShape) => {
  const { state, save } = books
  const creating = new Map<string, Promise<EmulatedSandbox>>()

  const sandboxOr404 = (id: string) => {
    const s = state.sandboxes[id]
    if (s === undefined) throw new HttpFailure(404, `sandbox ${id} not found`, "SANDBOX_NOT_FOUND")
    return s
  }

  const create = async (request: Request) => {
    const key = request.headers.get("idempotency-key")
    if (key !== null && (key === "" || key.length > MAX_KEY_LENGTH)) throw new HttpFailure(400, "Idempotency-Key must be 1-256 characters", "BAD_REQUEST")
    if (key !== null) {
      const existing = books.byKey(key) ?? (await creating.get(key)?.catch(() => undefined))
      if (existing !== undefined && state.sandboxes[existing.id] !== undefined) return json({ id: existing.id })
    }
    const sandbox: EmulatedSandbox = { id: `sb-${crypto.randomBytes(12).toString("hex")}`, runtimeId: crypto.randomUUID(), key, createdAt: Date.now() }
    const pending = (async () => {
      // The adapter's idempotency key is our sandbox id.
      await run(runtime.create({ id: sandbox.runtimeId, ...INSTANCE, internet: defaultInternetOf(runtime), labels: jailLabels("cloudflare", sandbox.id, key) }))
      state.sandboxes[sandbox.id] = sandbox
      save()
      return sandbox
    })()
    if (key !== null) creating.set(key, pending)
    try {
      await pending
    } finally {
      if (key !== null) creating.delete(key)
    }
    return json({ id: sandbox.id }, 201)
  }

  const running = async (id: string) => {
    const s = sandboxOr404(id)
    const jail = await run(runtime.get(s.runtimeId)).catch(() => Option.none())
    const up = Option.isSome(jail) && jail.value.state === "running"
    return json({ running: up, instanceId: s.runtimeId })
  }

  const remove = async (id: string) => {
    const s = sandboxOr404(id)
    await run(runtime.destroy(s.runtimeId))
    delete state.sandboxes[id]
    save()
    return json({ id, deleted: true })
  }

  return { create, running, remove, sandboxOr404 }
}
