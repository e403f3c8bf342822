/**
 * Root inside an image sandbox (an image without a User runs as uid 0, as Docker runs it): uid 0 in the jail's
 * user namespace is the sandbox's own unprivileged host uid, with no capability anywhere (bwrap --cap-drop ALL).
 * Every attempt here is what a container's root could do with capabilities: mount (in a mount namespace of its
 * own too), make network and user namespaces, chroot, chown another uid's file or give a file away, write
 * /proc/sys, change uid, join namespaces, make device nodes; and with internet, reach the host. Each must be
 * refused — with the jail's capabilities kept (bwrap --cap-add ALL instead) the namespace, mount and chroot ones
 * succeed, and this test fails.
 */
import * as os from "node:os"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { alpineLike, startRegistry, type TestRegistry } from "../support/registry.ts"
import { newRuntime, run, sh } from "../runtime/support.ts"

const { rt, cleanup } = newRuntime("image-root", { registryAllowPrivate: true })
let registry: TestRegistry
let hostServer: ReturnType<typeof Bun.serve> | undefined

beforeAll(async () => {
  registry = startRegistry()
  // No User: its processes are root inside.
  registry.push("test/root", "1", { layers: [alpineLike("Root")] })
  hostServer = Bun.serve({ port: 0, hostname: "0.0.0.0", fetch: () => new Response("the host itself") })
  await run(rt.create({ id: "root1", vcpu: 1, memoryMb: 256, diskMb: 128, internet: true, image: { reference: `${registry.host}/test/root:1` } }))
}, 60_000)
afterAll(async () => {
  await cleanup()
  hostServer?.stop(true)
  registry.stop()
})

describe("root inside an image sandbox", () => {
  it("is uid 0 with no capabilities: its effective, permitted, inheritable, bounding and ambient sets are empty", async () => {
    const r = await sh(rt, "root1", "id -u; id -g; grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status")
    expect(r.stdout).toBe(["0", "0", ...["Inh", "Prm", "Eff", "Bnd", "Amb"].map((s) => `Cap${s}:\t0000000000000000`), ""].join("\n"))
  })

  it("cannot mount, make namespaces, chroot, chown, write /proc/sys, change uid, join namespaces or make devices", async () => {
    const script = String.raw`
b=/bin/busybox
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "BREACH $name"; else echo "refused $name"; fi; }
echo mine > /tmp/mine
try mount $b mount -t tmpfs x /tmp
try mount-in-own-namespace $b unshare -m $b sh -c "$b mount -t tmpfs x /tmp"
try network-namespace $b unshare -n $b ip link set lo up
try user-namespace $b unshare -U $b true
try chroot $b chroot / $b true
try chown-host-file $b chown 0:0 /proc/sys/kernel/hostname
try chown-give-away $b chown 1:1 /tmp/mine
try write-proc-sys $b sh -c "echo evil > /proc/sys/kernel/hostname"
try sysctl $b sysctl -w vm.drop_caches=3
try setuid $b setpriv --reuid=1 --regid=1 --clear-groups $b true
try join-namespaces $b nsenter -t 1 -m -n -p $b true
try mknod $b mknod /tmp/sda b 8 0
try sethostname $b hostname evil
try link-down $b ip link set lo down
`
    const r = await sh(rt, "root1", script)
    const lines = r.stdout.trim().split("\n")
    expect(lines.filter((l) => l.startsWith("BREACH"))).toEqual([])
    expect(lines).toHaveLength(14)
    // Nothing changed: its hostname, its file's owner.
    expect((await sh(rt, "root1", "/bin/busybox hostname; stat -c %u:%g /tmp/mine")).stdout).toBe("root1\n0:0\n")
  })

  it("sees only its own processes, and reaches no address of the host (the egress filter holds for root as for anyone)", async () => {
    const port = hostServer!.port!
    const eth = Object.values(os.networkInterfaces()).flat().find((a) => a?.family === "IPv4" && !a.internal)?.address
    // The host answers on those addresses: the sandbox failing to is the filter, not the set-up.
    for (const address of ["127.0.0.1", ...(eth === undefined ? [] : [eth])]) expect(await (await fetch(`http://${address}:${port}/`)).text()).toBe("the host itself")
    const targets = ["10.0.2.2", "127.0.0.1", ...(eth === undefined ? [] : [eth])]
    const r = await sh(rt, "root1", `cat /proc/1/cmdline | /bin/busybox tr '\\0' ' ' | /bin/busybox cut -c1-5; for t in ${targets.join(" ")}; do wget -T 3 -qO- http://$t:${port}/ >/dev/null 2>&1 && echo "BREACH $t" || echo "refused $t"; done`)
    expect(r.stdout).toBe(`bwrap\n${targets.map((t) => `refused ${t}\n`).join("")}`)
  }, 60_000)
})
