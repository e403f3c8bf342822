/**
 * The Freestyle emulator's VMs, as Freestyle's SDK (`freestyle` 0.2.17) and the adapter use them: `POST /v5/vms`
 * (answered once the VM runs, as `VmData` with the ids of its firewall rules; a slug held by a live VM is a 409
 * `SLUG_TAKEN`), `GET /v5/vms[?state=&slug=&snapshotId=&metadata=k:v,…&limit=&offset=]` (with the counts per
 * state), `GET|PATCH|DELETE /v5/vms/{id or slug}`, `POST …/resize {cpu, memory, storage}` (MiB, upward only: a
 * smaller size is a 400 `RESIZE_DOWN_NOT_ALLOWED`), `POST …/pause` (the jail is frozen: `paused`) and `POST
 * …/start`.
 *
 * The firewall decides the network, as at Freestyle, where a VM gets nothing it does not allow: `{rules: []}` is a
 * VM with no network beyond itself, and a rule allowing the VM (an endpoint with no identity) all traffic to
 * `{public: true}` is one on the internet. Other rules (ports, protocols, CIDRs, other VMs, inbound traffic), TLS
 * rules, private networks and placement rules cannot be enforced here and are refused with a 400 naming them.
 *
 * A VM is deleted once it is `ttlSeconds` old (counted from its creation, `PATCH` moves it), and paused once one run
 * has lasted `maxRunSeconds`; -1 means none. One whose jail died reads as `stopped`. Every VM runs on the local
 * runtime's one base system (the snapshot is recorded, not restored) and starts at Freestyle's base size (2 vCPU,
 * 4 GiB, 16 GiB); a resize is recorded and reported, the jail keeps the limits it started with (the local runtime
 * cannot change a running jail's). Metadata keys and values are at most 63 characters, 64 entries.
 */
import { Option, Schema } from "effect"
import type { LocalRuntimeShape } from "../../../src/runtime/LocalRuntime.ts"
import { bodyTextAndJson, emulatorMessage, runOrThrow as run, unhonouredField } from "../../core/emulator/server.ts"
import { jailLabels } from "../../../src/providers/jailLabels.ts"
import { keyedSerial } from "../../../src/domain/KeyedSerial.ts"
import { FREESTYLE_SIZING } from "../../../src/providers/resources.ts"
import { METADATA_SANDBOX_ID } from "../adapter/wire.ts"
import { type Books, newVmId, type Vm, VM_STATES } from "./books.ts"
import { HttpFailure, json, readBody, StringMap } from "./http.ts"
import { sweepEvery } from "../../core/emulator/state.ts"

const SWEEP_MS = 1000
const GIB = 1024
/** Seconds, or -1 for none (Freestyle's "never"). */
const Seconds = Schema.Int.pipe(Schema.greaterThanOrEqualTo(-1))
const Slug = Schema.String.pipe(Schema.pattern(/^(?!.*--)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/))
const Metadata = StringMap.pipe(
  Schema.filter((m) => Object.keys(m).length <= 64 && Object.entries(m).every(([k, v]) => k.length <= 63 && v.length <= 63), {
    message: () => "metadata holds at most 64 entries, keys and values of at most 63 characters"
  })
)
const Endpoint = Schema.Struct({
  vmId: Schema.optional(Schema.String),
  vpcId: Schema.optional(Schema.String),
  tunnelId: Schema.optional(Schema.String),
  cidr: Schema.optional(Schema.String),
  public: Schema.optional(Schema.Literal(true)),
  port: Schema.optional(Schema.Int),
  protocol: Schema.optional(Schema.Literal("tcp", "udp", "icmp"))
})
const Firewall = Schema.Struct({ rules: Schema.Array(Schema.Struct({ action: Schema.Literal("allow"), source: Endpoint, destination: Endpoint })) })

const CreateVm = Schema.Struct({
  slug: Schema.optional(Schema.NullOr(Slug)),
  displayName: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(128)))),
  snapshotId: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1)))),
  ttlSeconds: Schema.optional(Schema.NullOr(Seconds)),
  maxRunSeconds: Schema.optional(Schema.NullOr(Seconds)),
  idleTimeoutSeconds: Schema.optional(Schema.NullOr(Seconds)),
  metadata: Schema.optional(Schema.NullOr(Metadata)),
  firewall: Firewall
})
/** What a create may carry that would change what the VM is, and that the emulator cannot do. */
const UNHONOURED_CREATE = {
  tls: "TLS rules are not emulated (no domain is served)",
  vpcs: "private networks are not emulated",
  networks: "private networks are not emulated",
  placement: "placement rules are not emulated (there is one host)",
  reassignSlug: "taking a slug from another VM is not emulated",
  maxRunTotalSeconds: "a lifetime run budget is not emulated (maxRunSeconds is)"
}
const UpdateVm = Schema.Struct({
  slug: Schema.optional(Schema.Union(Slug, Schema.Literal(""))),
  displayName: Schema.optional(Schema.String.pipe(Schema.maxLength(128))),
  ttlSeconds: Schema.optional(Seconds),
  maxRunSeconds: Schema.optional(Seconds),
  idleTimeoutSeconds: Schema.optional(Seconds),
  metadata: Schema.optional(StringMap)
})
const ResizeVm = Schema.Struct({
  cpu: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.positive()))),
  memory: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.positive()))),
  storage: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.positive())))
})

/** Whether a firewall puts the VM on the internet; why not when it says what cannot be enforced here. */
const internetOf = (firewall: typeof Firewall.Type): boolean => {
  let internet = false
  for (const [i, rule] of firewall.rules.entries()) {
    const self = (e: typeof Endpoint.Type) => e.vmId === undefined && e.vpcId === undefined && e.tunnelId === undefined && e.cidr === undefined && e.public === undefined
    const outboundToPublic = self(rule.source) && rule.source.port === undefined && rule.source.protocol === undefined &&
      rule.destination.public === true && rule.destination.port === undefined && rule.destination.protocol === undefined
    if (!outboundToPublic) {
      throw new HttpFailure(400, `firewall.rules[${i}]: only all outbound traffic to the public internet (or none) is emulated`, "INVALID_PARAMETERS")
    }
    internet = true
  }
  return internet
}

export interface ControlOptions {
  /** The VM is gone: what other planes keep for it goes. */
  readonly onDeleted: (vm: Vm) => void
}

export const makeControl = (books: Books, runtime: LocalRuntimeShape, options: ControlOptions) => {
  const { state, save } = books

  /** One state change of a VM at a time, in order. */
  const serial = keyedSerial().run

  const setState = (vm: Vm, next: Vm["state"]) => {
    const now = Date.now()
    if (vm.runningSinceMs !== null && next !== "running") {
      vm.runMs += now - vm.runningSinceMs
      vm.runningSinceMs = null
    }
    if (next === "running" && vm.runningSinceMs === null) vm.runningSinceMs = now
    vm.state = next
    vm.updatedAtMs = now
    save()
  }

  const runningMs = (vm: Vm, now: number) => vm.runMs + (vm.runningSinceMs === null ? 0 : now - vm.runningSinceMs)

  /** `VmData`, as Freestyle's API answers it. */
  const view = (vm: Vm, stateNow: Vm["state"] = vm.state) => ({
    id: vm.id,
    state: stateNow,
    slug: vm.name,
    displayName: vm.displayName,
    resources: { cpu: vm.vcpuCount, memory: Math.round(vm.memSizeGb * GIB), storage: Math.round(vm.rootfsSizeGb * GIB) },
    snapshotId: vm.snapshotId,
    sourceSnapshotSlugAtCreate: vm.snapshotId,
    idleTimeoutSeconds: vm.idleTimeoutSeconds,
    ttlSeconds: vm.ttlSeconds,
    maxRunSeconds: vm.maxRunSeconds,
    totalRunSeconds: Math.floor(runningMs(vm, Date.now()) / 1000),
    automaticRestart: false,
    metadata: vm.metadata,
    cpuTimeSeconds: null,
    vpcs: [],
    networks: [],
    createdAt: new Date(vm.createdAtMs).toISOString(),
    updatedAt: new Date(Math.max(vm.updatedAtMs, vm.createdAtMs)).toISOString()
  })

  /** As Freestyle reports a VM whose machine died: stopped. */
  const observed = async (vm: Vm) => {
    if (vm.state !== "running" && vm.state !== "paused") return view(vm)
    const jail = await run(runtime.get(vm.id)).catch(() => Option.none())
    return Option.isSome(jail) && jail.value.state !== "stopped" ? view(vm) : view(vm, "stopped")
  }

  /** A live VM by id or slug (404 `VM_NOT_FOUND` otherwise). */
  const vmOr404 = (idOrSlug: string) => {
    const vm = state.vms[idOrSlug] ?? Object.values(state.vms).find((v) => !v.deleted && v.name === idOrSlug)
    if (vm === undefined || vm.deleted) throw new HttpFailure(404, `VM ${idOrSlug} not found`, "VM_NOT_FOUND")
    return vm
  }

  /** The jail behind a VM; the VM runs once it is up (or is stopped). */
  const boot = (vm: Vm) =>
    serial(vm.id, async () => {
      if (vm.state !== "starting") return
      try {
        await run(runtime.create({
          id: vm.id,
          vcpu: vm.vcpuCount,
          memoryMb: vm.memSizeGb * GIB,
          diskMb: vm.rootfsSizeGb * GIB,
          internet: vm.internet,
          env: {},
          labels: jailLabels("freestyle", vm.id, vm.metadata[METADATA_SANDBOX_ID])
        }))
        if (!vm.deleted) setState(vm, "running")
      } catch (e) {
        // Freestyle says only that the VM stopped; the runtime's own message goes to the operator.
        console.error(`freestyle emulator: VM ${vm.id} could not start: ${emulatorMessage(e, "freestyle")}`)
        setState(vm, "stopped")
      }
    })

  const none = (seconds: number | null | undefined) => (seconds === undefined || seconds === null || seconds < 0 ? null : seconds)

  const create = async (request: Request) => {
    const { text, raw } = await bodyTextAndJson(request)
    // Empty lists (`vpcs: []`, `tls: {rules: []}`) ask for nothing.
    const empty = (v: unknown) => (Array.isArray(v) && v.length === 0) || (Array.isArray((v as { rules?: unknown } | null)?.rules) && (v as { rules: Array<unknown> }).rules.length === 0)
    const asked = typeof raw === "object" && raw !== null ? Object.fromEntries(Object.entries(raw).filter(([, v]) => !empty(v))) : raw
    const refused = unhonouredField(asked, UNHONOURED_CREATE)
    if (refused !== undefined) throw new HttpFailure(400, refused, "INVALID_PARAMETERS")
    const body = await readBody(new Request(request.url, { method: "POST", body: text }), CreateVm)
    const internet = internetOf(body.firewall)
    const slug = body.slug ?? null
    if (slug !== null && Object.values(state.vms).some((vm) => !vm.deleted && vm.name === slug)) {
      throw new HttpFailure(409, `the slug ${slug} is taken by another VM`, "SLUG_TAKEN")
    }
    const { base } = FREESTYLE_SIZING
    const vm: Vm = {
      id: newVmId(),
      name: slug,
      displayName: body.displayName ?? null,
      state: "starting",
      internet,
      updatedAtMs: Date.now(),
      snapshotId: body.snapshotId ?? "freestyle/ubuntu",
      metadata: { ...body.metadata },
      vcpuCount: base.vcpu,
      memSizeGb: base.memoryMb / GIB,
      rootfsSizeGb: base.diskMb / GIB,
      createdAtMs: Date.now(),
      ttlSeconds: none(body.ttlSeconds),
      maxRunSeconds: none(body.maxRunSeconds),
      idleTimeoutSeconds: none(body.idleTimeoutSeconds),
      runMs: 0,
      runningSinceMs: null,
      deleted: false,
      deletedAtMs: null
    }
    state.vms[vm.id] = vm
    save()
    books.prune()
    await boot(vm)
    if (vm.state !== "running") throw new HttpFailure(500, `VM ${vm.id} did not start`, "VM_SETUP_FAILED")
    const rules = body.firewall.rules.map((_, i) => `fw-${vm.id}-${i}`)
    return json({ ...view(vm), firewallRules: rules.map((id) => ({ id })), tlsRules: [] })
  }

  const list = async (url: URL) => {
    const wanted = url.searchParams.get("state")
    if (wanted !== null && !(VM_STATES as ReadonlyArray<string>).includes(wanted)) throw new HttpFailure(400, `unknown state ${wanted}`, "INVALID_PARAMETERS")
    const slug = url.searchParams.get("slug")
    const snapshot = url.searchParams.get("snapshotId")
    const metadata = (url.searchParams.get("metadata") ?? "").split(",").filter((p) => p !== "").map((p) => {
      const at = p.indexOf(":")
      if (at <= 0) throw new HttpFailure(400, `metadata filters are key:value, not ${p}`, "INVALID_PARAMETERS")
      return [p.slice(0, at), p.slice(at + 1)] as const
    })
    const limit = Number(url.searchParams.get("limit") ?? "100")
    const offset = Number(url.searchParams.get("offset") ?? "0")
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000 || !Number.isInteger(offset) || offset < 0) {
      throw new HttpFailure(400, "limit is 1-1000 and offset at least 0", "INVALID_PARAMETERS")
    }
    const all = await Promise.all(Object.values(state.vms).filter((vm) => !vm.deleted).sort((a, b) => b.createdAtMs - a.createdAtMs).map(observed))
    const counts = (s: string) => all.filter((vm) => vm.state === s).length
    const matching = all.filter((vm) =>
      (wanted === null || vm.state === wanted) && (slug === null || vm.slug === slug) && (snapshot === null || vm.snapshotId === snapshot) &&
      metadata.every(([k, v]) => vm.metadata[k] === v)
    )
    return json({
      vms: matching.slice(offset, offset + limit),
      totalCount: matching.length,
      runningCount: counts("running"),
      startingCount: counts("starting"),
      pausingCount: counts("pausing"),
      pausedCount: counts("paused"),
      stoppedCount: counts("stopped")
    })
  }

  const remove = (idOrSlug: string) => {
    const vm = vmOr404(idOrSlug)
    return serial(vm.id, async () => {
      if (vm.deleted) throw new HttpFailure(404, `VM ${idOrSlug} not found`, "VM_NOT_FOUND")
      await run(runtime.destroy(vm.id))
      setState(vm, "stopped")
      vm.deleted = true
      vm.deletedAtMs = Date.now()
      save()
      options.onDeleted(vm)
      return new Response(null, { status: 204 })
    })
  }

  const update = async (request: Request, idOrSlug: string) => {
    const vm = vmOr404(idOrSlug)
    const body = await readBody(request, UpdateVm)
    if (body.slug !== undefined && body.slug !== "" && Object.values(state.vms).some((v) => !v.deleted && v.id !== vm.id && v.name === body.slug)) {
      throw new HttpFailure(409, `the slug ${body.slug} is taken by another VM`, "SLUG_TAKEN")
    }
    if (body.slug !== undefined) vm.name = body.slug === "" ? null : body.slug
    if (body.displayName !== undefined) vm.displayName = body.displayName === "" ? null : body.displayName
    if (body.ttlSeconds !== undefined) vm.ttlSeconds = none(body.ttlSeconds)
    if (body.maxRunSeconds !== undefined) vm.maxRunSeconds = none(body.maxRunSeconds)
    if (body.idleTimeoutSeconds !== undefined) vm.idleTimeoutSeconds = none(body.idleTimeoutSeconds)
    // Merged: only the keys sent are touched, an empty value removes one.
    for (const [k, v] of Object.entries(body.metadata ?? {})) {
      if (v === "") delete vm.metadata[k]
      else vm.metadata[k] = v
    }
    if (Object.keys(vm.metadata).length > 64 || Object.entries(vm.metadata).some(([k, v]) => k.length > 63 || v.length > 63)) {
      throw new HttpFailure(400, "metadata holds at most 64 entries, keys and values of at most 63 characters", "INVALID_PARAMETERS")
    }
    vm.updatedAtMs = Date.now()
    save()
    return json(await observed(vm))
  }

  const resize = async (request: Request, idOrSlug: string) => {
    const vm = vmOr404(idOrSlug)
    const body = await readBody(request, ResizeVm)
    const { max } = FREESTYLE_SIZING
    const next = {
      vcpuCount: body.cpu ?? vm.vcpuCount,
      memSizeGb: body.memory == null ? vm.memSizeGb : body.memory / GIB,
      rootfsSizeGb: body.storage == null ? vm.rootfsSizeGb : body.storage / GIB
    }
    if (next.vcpuCount < vm.vcpuCount || next.memSizeGb < vm.memSizeGb || next.rootfsSizeGb < vm.rootfsSizeGb) {
      throw new HttpFailure(400, "a VM can only grow", "RESIZE_DOWN_NOT_ALLOWED")
    }
    if (next.vcpuCount > max.vcpu || next.memSizeGb * GIB > max.memoryMb || next.rootfsSizeGb * GIB > max.diskMb) {
      throw new HttpFailure(400, `at most ${max.vcpu} vCPU, ${max.memoryMb} MiB of memory and ${max.diskMb} MiB of disk`, "INVALID_PARAMETERS")
    }
    if (vm.state === "stopped") throw new HttpFailure(409, `VM ${idOrSlug} is stopped`, "VM_NOT_RUNNING")
    Object.assign(vm, next)
    vm.updatedAtMs = Date.now()
    save()
    return json(await observed(vm))
  }

  const pause = (idOrSlug: string) => {
    const vm = vmOr404(idOrSlug)
    return serial(vm.id, async () => {
      if (vm.state === "paused") return json(view(vm))
      if (vm.state !== "running") throw new HttpFailure(409, `VM ${idOrSlug} is ${vm.state}, not running`, "VM_NOT_RUNNING")
      setState(vm, "pausing")
      await run(runtime.pause(vm.id))
      setState(vm, "paused")
      return json(view(vm))
    })
  }

  const start = (idOrSlug: string) => {
    const vm = vmOr404(idOrSlug)
    return serial(vm.id, async () => {
      if (vm.state === "running") return json(view(vm))
      if (vm.state !== "paused") throw new HttpFailure(409, `VM ${idOrSlug} is ${vm.state}, it cannot be started here`, "VM_NOT_RUNNING")
      setState(vm, "starting")
      await run(runtime.resume(vm.id))
      setState(vm, "running")
      return json(view(vm))
    })
  }

  // After a restart: VMs caught starting or pausing carry on.
  for (const vm of Object.values(state.vms)) {
    if (vm.deleted) continue
    if (vm.state === "starting" && vm.runMs === 0 && vm.runningSinceMs === null) void boot(vm)
    else if (vm.state === "pausing") void serial(vm.id, async () => (await run(runtime.pause(vm.id)).catch(() => undefined), setState(vm, "paused")))
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
    get: async (idOrSlug: string) => json(await observed(vmOr404(idOrSlug))),
    update,
    remove,
    resize,
    pause,
    start,
    /** The VM, which must be running (commands and files reach only a running VM). */
    runningVm: (idOrSlug: string) => {
      const vm = vmOr404(idOrSlug)
      if (vm.state !== "running") throw new HttpFailure(409, `VM ${idOrSlug} is ${vm.state}, not running`, "VM_NOT_RUNNING")
      return vm
    },
    stop: () => sweeper.stop()
  }
}
