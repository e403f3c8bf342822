/**
 * The Freestyle emulator's VMs: `POST /v5/vms` (a name in use by a live VM is a 409 `VM_NAME_TAKEN`; with
 * `waitForReadySignal: false` the answer is a 202 while the VM starts behind it, as Freestyle answers before the VM
 * is ready), `GET /v5/vms[?search=]`, `GET|DELETE /v5/vms/{id}`, `POST …/resize` (upward only: a smaller size is a
 * 400 `RESIZE_DOWN_NOT_ALLOWED`), `POST …/pause` (the jail is frozen: `suspended`) and `POST …/start`.
 *
 * A VM is deleted once it is `ttlSeconds` old, and paused once it has run `maxRunSeconds`; one whose jail died
 * reads as `lost`. Every VM runs on the local runtime's one base system (the snapshot is recorded, not restored),
 * starts at Freestyle's base size (2 vCPU, 4 GiB, 16 GiB) and reaches the internet (Freestyle's firewall is open by
 * default). A resize is recorded and reported; the jail keeps the limits it started with (the local runtime cannot
 * change a running jail's). Public ports and domains are refused: none are served.
 */
import { Option, Schema } from "effect"
import { defaultInternetOf, type LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { runOrThrow as run } from "../../core/emulator/server.ts"
import { jailLabels } from "../../core/jailLabels.ts"
import { FREESTYLE_SIZING } from "../../core/resources.ts"
import { METADATA_SANDBOX_ID } from "../adapter/wire.ts"
import { type Books, newVmId, type Vm } from "./books.ts"
import { HttpFailure, json, readBody, StringMap } from "./http.ts"
import { sweepEvery } from "../../core/emulator/state.ts"

const SWEEP_MS = 1000
const GIB = 1024
const NonNegativeInt = Schema.Int.pipe(Schema.nonNegative())

const CreateVm = Schema.Struct({
  name: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.pattern(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/)))),
  snapshotId: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1)))),
  ports: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({ port: Schema.Int, targetPort: Schema.Int })))),
  waitForReadySignal: Schema.optional(Schema.NullOr(Schema.Boolean)),
  readySignalTimeoutSeconds: Schema.optional(Schema.NullOr(NonNegativeInt)),
  ttlSeconds: Schema.optional(Schema.NullOr(NonNegativeInt)),
  maxRunSeconds: Schema.optional(Schema.NullOr(NonNegativeInt)),
  idleTimeoutSeconds: Schema.optional(Schema.NullOr(NonNegativeInt)),
  metadata: Schema.optional(Schema.NullOr(StringMap))
})
const ResizeVm = Schema.Struct({
  vcpuCount: Schema.optional(Schema.NullOr(NonNegativeInt)),
  memSizeGb: Schema.optional(Schema.NullOr(NonNegativeInt)),
  rootfsSizeGb: Schema.optional(Schema.NullOr(NonNegativeInt))
})

export interface ControlOptions {
  /** The VM is gone: what other planes keep for it goes. */
  readonly onDeleted: (vm: Vm) => void
}

export const makeControl = (books: Books, runtime: LocalRuntimeShape, options: ControlOptions) => {
  const { state, save } = books
  const chains = new Map<string, Promise<unknown>>()

  /** One state change of a VM at a time, in order. */
  const serial = <A>(id: string, work: () => Promise<A>): Promise<A> => {
    const next = (chains.get(id) ?? Promise.resolve()).then(work, work)
    const settled = next.catch(() => undefined)
    chains.set(id, settled)
    void settled.then(() => chains.get(id) === settled && chains.delete(id))
    return next
  }

  const setState = (vm: Vm, next: Vm["state"]) => {
    const now = Date.now()
    if (vm.runningSinceMs !== null && next !== "running") {
      vm.runMs += now - vm.runningSinceMs
      vm.runningSinceMs = null
    }
    if (next === "running" && vm.runningSinceMs === null) vm.runningSinceMs = now
    vm.state = next
    save()
  }

  const view = (vm: Vm, stateNow: Vm["state"] = vm.state) => ({
    id: vm.id,
    name: vm.name,
    state: stateNow,
    snapshotId: vm.snapshotId,
    metadata: vm.metadata,
    vcpuCount: vm.vcpuCount,
    memSizeGb: vm.memSizeGb,
    rootfsSizeGb: vm.rootfsSizeGb,
    createdAt: new Date(vm.createdAtMs).toISOString(),
    cpuTimeSeconds: null,
    deleted: vm.deleted
  })

  /** As Freestyle reports a VM whose machine died: `lost`. */
  const observed = async (vm: Vm) => {
    if (vm.state !== "running" && vm.state !== "suspended") return view(vm)
    const jail = await run(runtime.get(vm.id)).catch(() => Option.none())
    return Option.isSome(jail) && jail.value.state !== "stopped" ? view(vm) : view(vm, "lost")
  }

  const vmOr404 = (id: string) => {
    const vm = state.vms[id]
    if (vm === undefined || vm.deleted) throw new HttpFailure(404, "VM_NOT_FOUND", `VM ${id} not found`)
    return vm
  }

  /** The jail behind a VM; the VM runs once it is up (or is lost). */
  const boot = (vm: Vm) =>
    serial(vm.id, async () => {
      if (vm.state !== "starting") return
      try {
        await run(runtime.create({
          id: vm.id,
          vcpu: vm.vcpuCount,
          memoryMb: vm.memSizeGb * GIB,
          diskMb: vm.rootfsSizeGb * GIB,
          internet: defaultInternetOf(runtime),
          env: {},
          labels: jailLabels("freestyle", vm.id, vm.metadata[METADATA_SANDBOX_ID])
        }))
        if (!vm.deleted) setState(vm, "running")
      } catch {
        setState(vm, "lost")
      }
    })

  const create = async (request: Request) => {
    const body = await readBody(request, CreateVm)
    if ((body.ports ?? []).length > 0) throw new HttpFailure(400, "INVALID_PARAMETERS", "the emulator serves no public ports (pass an empty array)")
    const name = body.name ?? null
    if (name !== null && Object.values(state.vms).some((vm) => !vm.deleted && vm.name === name)) {
      throw new HttpFailure(409, "VM_NAME_TAKEN", `a VM named ${name} already exists`)
    }
    const { base } = FREESTYLE_SIZING
    const vm: Vm = {
      id: newVmId(),
      name,
      state: "starting",
      snapshotId: body.snapshotId ?? "freestyle/ubuntu-sm",
      metadata: { ...body.metadata },
      vcpuCount: base.vcpu,
      memSizeGb: base.memoryMb / GIB,
      rootfsSizeGb: base.diskMb / GIB,
      createdAtMs: Date.now(),
      ttlSeconds: body.ttlSeconds ?? null,
      maxRunSeconds: body.maxRunSeconds ?? null,
      idleTimeoutSeconds: body.idleTimeoutSeconds ?? null,
      runMs: 0,
      runningSinceMs: null,
      deleted: false,
      deletedAtMs: null
    }
    state.vms[vm.id] = vm
    save()
    books.prune()
    const booting = boot(vm)
    // Not waiting for the ready signal: answered before the VM is up, so nothing certain is said (202).
    if (body.waitForReadySignal === false) return json({ id: vm.id, domains: [] }, 202)
    await booting
    if (vm.state === "lost") throw new HttpFailure(500, "VM_SETUP_FAILED", `VM ${vm.id} did not start`)
    return json({ id: vm.id, domains: [], snapshotId: vm.snapshotId })
  }

  const list = async (url: URL) => {
    const search = url.searchParams.get("search") ?? ""
    const includeDeleted = url.searchParams.get("includeDeleted") === "true"
    const vms = Object.values(state.vms)
      .filter((vm) => (includeDeleted || !vm.deleted) && (search === "" || (vm.name ?? "").includes(search) || vm.id === search))
      .sort((a, b) => b.createdAtMs - a.createdAtMs)
    return json({ vms: await Promise.all(vms.map((vm) => (vm.deleted ? view(vm) : observed(vm)))) })
  }

  const remove = (id: string) => {
    const vm = vmOr404(id)
    return serial(id, async () => {
      if (vm.deleted) throw new HttpFailure(404, "VM_NOT_FOUND", `VM ${id} not found`)
      await run(runtime.destroy(vm.id))
      setState(vm, "stopped")
      vm.deleted = true
      vm.deletedAtMs = Date.now()
      save()
      options.onDeleted(vm)
      return json({ id: vm.id })
    })
  }

  const resize = async (request: Request, id: string) => {
    const vm = vmOr404(id)
    const body = await readBody(request, ResizeVm)
    const { max } = FREESTYLE_SIZING
    const next = { vcpuCount: body.vcpuCount ?? vm.vcpuCount, memSizeGb: body.memSizeGb ?? vm.memSizeGb, rootfsSizeGb: body.rootfsSizeGb ?? vm.rootfsSizeGb }
    if (next.vcpuCount < vm.vcpuCount || next.memSizeGb < vm.memSizeGb || next.rootfsSizeGb < vm.rootfsSizeGb) {
      throw new HttpFailure(400, "RESIZE_DOWN_NOT_ALLOWED", "a VM can only grow")
    }
    if (next.vcpuCount > max.vcpu || next.memSizeGb * GIB > max.memoryMb || next.rootfsSizeGb * GIB > max.diskMb) {
      throw new HttpFailure(400, "INVALID_PARAMETERS", `at most ${max.vcpu} vCPU, ${max.memoryMb / GIB} GiB of memory and ${max.diskMb / GIB} GiB of disk`)
    }
    if (vm.state === "lost" || vm.state === "stopped") throw new HttpFailure(409, "VM_NOT_RUNNING", `VM ${id} is ${vm.state}`)
    Object.assign(vm, next)
    save()
    return json({})
  }

  const pause = (id: string) => {
    const vm = vmOr404(id)
    return serial(id, async () => {
      if (vm.state === "suspended") return json({ id: vm.id, vmInstanceId: vm.id, snapshotLayerId: null })
      if (vm.state !== "running") throw new HttpFailure(409, "VM_NOT_RUNNING", `VM ${id} is ${vm.state}, not running`)
      setState(vm, "suspending")
      await run(runtime.pause(vm.id))
      setState(vm, "suspended")
      return json({ id: vm.id, vmInstanceId: vm.id, snapshotLayerId: null })
    })
  }

  const start = (id: string) => {
    const vm = vmOr404(id)
    return serial(id, async () => {
      if (vm.state === "running") return json({ id: vm.id })
      if (vm.state !== "suspended") throw new HttpFailure(409, "VM_NOT_RUNNING", `VM ${id} is ${vm.state}, it cannot be started`)
      setState(vm, "starting")
      await run(runtime.resume(vm.id))
      setState(vm, "running")
      return json({ id: vm.id })
    })
  }

  const runningMs = (vm: Vm, now: number) => vm.runMs + (vm.runningSinceMs === null ? 0 : now - vm.runningSinceMs)

  // After a restart: VMs caught starting, suspending or resuming carry on.
  for (const vm of Object.values(state.vms)) {
    if (vm.deleted) continue
    if (vm.state === "starting" && vm.runMs === 0 && vm.runningSinceMs === null) void boot(vm)
    else if (vm.state === "suspending") void serial(vm.id, async () => (await run(runtime.pause(vm.id)).catch(() => undefined), setState(vm, "suspended")))
    else if (vm.state === "starting") void serial(vm.id, async () => (await run(runtime.resume(vm.id)).catch(() => undefined), setState(vm, "running")))
  }

  /** VMs past their TTL are deleted; VMs past their longest run are paused. */
  const sweeper = sweepEvery(SWEEP_MS, (now) => {
    const live = Object.values(state.vms).filter((vm) => !vm.deleted)
    const expired = live.filter((vm) => vm.ttlSeconds !== null && now - vm.createdAtMs >= vm.ttlSeconds * 1000)
    const tired = live.filter((vm) => vm.state === "running" && vm.maxRunSeconds !== null && runningMs(vm, now) >= vm.maxRunSeconds * 1000)
    return Promise.all([
      ...expired.map((vm) => remove(vm.id).catch(() => undefined)),
      ...tired.filter((vm) => !expired.includes(vm)).map((vm) => pause(vm.id).catch(() => undefined))
    ])
  })

  return {
    create,
    list,
    get: async (id: string) => json(await observed(vmOr404(id))),
    remove,
    resize,
    pause,
    start,
    /** The VM, which must be running (commands and files reach only a running VM). */
    runningVm: (id: string) => {
      const vm = vmOr404(id)
      if (vm.state !== "running") throw new HttpFailure(409, "VM_NOT_RUNNING", `VM ${id} is ${vm.state}, not running`)
      return vm
    },
    stop: () => sweeper.stop()
  }
}
