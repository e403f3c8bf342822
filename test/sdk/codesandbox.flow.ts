/**
 * CodeSandbox's official SDK (`@codesandbox/sdk`, pinned in package.json) through its lifecycle against the
 * CodeSandbox emulator, offline (test/support/offline.ts runs it; test/sdk/codesandbox.test.ts checks its report).
 * The SDK is pointed at the emulator only by the environment `emulate` prints for it (CSB_BASE_URL, CSB_API_KEY).
 * Lifecycle only: a VM's commands and files go through the SDK's pitcher websocket, which is not emulated.
 */
import assert from "node:assert/strict"
import { CodeSandbox } from "@codesandbox/sdk"
import { runFlow } from "./flow.ts"

const TAG = `sdk-contract-${process.pid}`

await runFlow(async ({ step, skip }) => {
  const sdk = new CodeSandbox()
  const sandbox = await step("create (fork of the default template, then start)", () => sdk.sandboxes.create({ title: "sdk flow", tags: [TAG], privacy: "private", hibernationTimeoutSeconds: 600 }))

  await step("the first boot is the fork's", () => {
    assert.equal(sandbox.bootupType, "FORK")
  })

  await step("get", async () => {
    const info = await sdk.sandboxes.get(sandbox.id)
    assert.equal(info.id, sandbox.id)
    assert.equal(info.title, "sdk flow")
    assert.deepEqual([...info.tags].sort(), ["sdk", TAG].sort())
    assert.equal(info.privacy, "private")
  })

  await step("list (by tag) and the running VMs", async () => {
    const listed = await sdk.sandboxes.list({ tags: [TAG] })
    assert.deepEqual(listed.sandboxes.map((s) => s.id), [sandbox.id])
    assert.equal(listed.totalCount, 1)
    const running = await sdk.sandboxes.listRunning()
    assert.ok(running.vms.some((vm) => vm.id === sandbox.id), "the VM is running")
  })

  await step("hibernate, then resume (from the hibernation)", async () => {
    await sdk.sandboxes.hibernate(sandbox.id)
    assert.ok(!(await sdk.sandboxes.listRunning()).vms.some((vm) => vm.id === sandbox.id), "a hibernated VM is not running")
    const resumed = await sdk.sandboxes.resume(sandbox.id)
    assert.equal(resumed.bootupType, "RESUME")
  })

  await step("shutdown, then resume (a clean boot)", async () => {
    await sdk.sandboxes.shutdown(sandbox.id)
    assert.ok(!(await sdk.sandboxes.listRunning()).vms.some((vm) => vm.id === sandbox.id), "a VM shut down is not running")
    assert.equal((await sdk.sandboxes.resume(sandbox.id)).bootupType, "CLEAN")
  })

  skip("connect: commands, files, ports, terminals", "the VM's runtime is the SDK's pitcher websocket, which the CodeSandbox emulator does not serve")
  skip("hosts and preview tokens", "not served by the CodeSandbox emulator")

  await step("delete", async () => {
    await sdk.sandboxes.delete(sandbox.id)
    const gone = await sdk.sandboxes.get(sandbox.id).then(() => null, (e: unknown) => e)
    assert.ok(gone instanceof Error && /not found/.test(gone.message), `a deleted sandbox is not found: ${String(gone)}`)
  })
})
