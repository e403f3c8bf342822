/** docs/providers.md's provider table is the one the plugins declare (scripts/provider-table.ts): it cannot drift. */
import * as fs from "node:fs"
import * as path from "node:path"
import { expect, it } from "vitest"
import { providerRows, TABLE_HEADER } from "../../scripts/provider-table.ts"

it("docs/providers.md's provider table matches what each plugin declares for its real provider", async () => {
  const readme = fs.readFileSync(path.join(import.meta.dirname, "..", "..", "docs", "providers.md"), "utf8")
  const table = /<!-- provider-table -->\n([\s\S]*?)\n<!-- \/provider-table -->/.exec(readme)?.[1]
  expect(table, "docs/providers.md has no provider table between its markers").toBeDefined()
  const rows = await providerRows()
  expect(rows.length).toBe(11)
  expect(table!.split("\n")).toEqual([...TABLE_HEADER, ...rows])
})
