import { describe, expect, it } from "vitest"
import { sandboxIdOfTags, sandboxTag } from "../../providers/codesandbox/adapter/wire.ts"
import { describe as describeService, sandboxIdOfDescription } from "../../providers/northflank/adapter/wire.ts"
import { sandboxIdOfName, sandboxName } from "../../providers/prime/adapter/wire.ts"
import { jailLabels } from "../../src/providers/jailLabels.ts"

const ID = `sbx_${"a1".repeat(16)}`

describe("jail labels", () => {
  it("name the provider, the resource and our sandbox id", () => {
    expect(jailLabels("vercel", "metal-sbx-a1", ID)).toEqual({ provider: "vercel", "metal.resource_id": "metal-sbx-a1", "metal.sandbox_id": ID })
  })

  it("leave out a sandbox id that is not one of ours (absent, not a string, another shape, too long)", () => {
    for (const bad of [undefined, null, 42, "", "sbx_", "prj_abc", "sbx_a b", `sbx_${"a".repeat(200)}`, "metal-sbx_abc"]) {
      expect(jailLabels("e2b", "i1", bad), String(bad)).toEqual({ provider: "e2b", "metal.resource_id": "i1" })
    }
  })

  it("our id is read back from where each adapter writes it into a name, tag or description", () => {
    expect([sandboxIdOfTags(["x", sandboxTag(ID)]), sandboxIdOfDescription(describeService(ID)), sandboxIdOfName(sandboxName(ID))]).toEqual([ID, ID, ID])
    expect([sandboxIdOfTags(["metal-tier-nano"]), sandboxIdOfDescription(null), sandboxIdOfDescription("a service"), sandboxIdOfName("mine")]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined
    ])
  })
})
