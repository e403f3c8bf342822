/**
 * Northflank's official client (`@northflank/js-client`, pinned in package.json) through a deployment service's
 * lifecycle against the Northflank emulator, offline (test/support/offline.ts runs it; test/sdk/northflank.test.ts
 * checks its report). The client reads no environment: its context is given the emulator's token and host (the API
 * URL without `/v1`), as one is given Northflank's. Lifecycle only: a container's shell is the exec websocket, which
 * is not emulated.
 */
import assert from "node:assert/strict"
import { ApiClient, ApiClientInMemoryContextProvider } from "@northflank/js-client"
import { emulatorOf, runFlow } from "./flow.ts"

const emulator = emulatorOf("northflank")
const projectId = emulator.gatewayEnv["NORTHFLANK_PROJECT_ID"]!
const name = `sdk-flow-${process.pid}`

await runFlow(async ({ step, skip }) => {
  const contexts = new ApiClientInMemoryContextProvider()
  await contexts.addContext({ name: "emulator", token: emulator.apiKey, host: emulator.urls["api"]!.replace(/\/v1$/, "") })
  const client = new ApiClient(contexts, { throwErrorOnHttpErrorCode: true })
  const parameters = { projectId, serviceId: name }

  await step("create a deployment service (an external image, one instance)", async () => {
    const created = await client.create.service.deployment({
      parameters: { projectId },
      data: {
        name,
        description: "sdk contract flow",
        tags: ["sdk-contract"],
        billing: { deploymentPlan: "nf-compute-20" },
        deployment: { instances: 1, external: { imagePath: "ubuntu:22.04" }, docker: { configType: "customCommand", customCommand: "sleep infinity" } }
      }
    })
    assert.equal(created.error, undefined)
    assert.equal(created.data.id, name)
  })

  await step("get", async () => {
    const service = (await client.get.service({ parameters })).data
    assert.equal(service.id, name)
    assert.equal(service.servicePaused, false)
    assert.equal(service.status?.deployment?.status, "COMPLETED")
  })

  await step("list services", async () => {
    const listed = await client.list.services({ parameters: { projectId } })
    assert.ok(listed.data.services.some((s) => s.id === name), "the service is listed")
    assert.equal(listed.pagination?.hasNextPage, false)
  })

  await step("pause, then resume", async () => {
    await client.pause.service({ parameters })
    assert.equal((await client.get.service({ parameters })).data.servicePaused, true)
    await client.resume.service({ parameters, data: { instances: 1 } })
    assert.equal((await client.get.service({ parameters })).data.servicePaused, false)
  })

  await step("scale to 0 and back to 1", async () => {
    await client.scale.service({ parameters, data: { instances: 0 } })
    assert.equal((await client.get.service({ parameters })).data.servicePaused, true)
    await client.scale.service({ parameters, data: { instances: 1 } })
    assert.equal((await client.get.service({ parameters })).data.servicePaused, false)
  })

  skip("exec, port forwarding, file copy, logs, metrics", "a container's shell and streams go through Northflank's websockets, which the emulator does not serve")
  skip("builds, ports and domains, volumes, addons, jobs", "not served by the Northflank emulator")

  await step("delete", async () => {
    await client.delete.service({ parameters, options: { delete_child_objects: true } })
    const gone = await client.get.service({ parameters }).then(() => null, (e: unknown) => e)
    assert.ok(gone !== null && (gone as { status?: number }).status === 404, `a deleted service is not found: ${JSON.stringify(gone)}`)
  })
})
