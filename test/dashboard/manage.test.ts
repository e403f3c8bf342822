/**
 * The dashboard's management pages in a real headless Chromium against a real gateway (one server and one browser
 * for the file, the steps in order): sign in by pasting a token (kept nowhere by the page), then everything a
 * person steers besides the first walk-through (dashboard.test.ts) — projects and organizations renamed and
 * deleted behind the spec's confirmations, invitations and their roles, the auto top-up form, a provider's own
 * credentials (BYOK), a request no provider can serve explained provider by provider, an OCI image's pull shown
 * layer by layer (a registry on loopback), Pause offered only where the provider can pause, a sandbox's file opened and
 * deleted, a process cancelled, the sandbox paused, resumed, extended and destroyed while the list's filters
 * follow, and an API key revoked then deleted. Each refusal shows
 * the API's message and code. Each step saves a screenshot (test/support/browser.ts).
 */
import type { BrowserContext, Locator, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newPage, openBrowser, type OpenBrowser, shot } from "../support/browser.ts"
import { alpineLike, startRegistry, type TestRegistry } from "../support/registry.ts"
import { api, type Bootstrap, bootstrap, type RunningServer, startServer } from "../support/server.ts"

const STEP_MS = 120_000

let server: RunningServer
let registry: TestRegistry
let owner: Bootstrap
let http: ReturnType<typeof api>
let chromium: OpenBrowser
let context: BrowserContext
let page: Page
let errors: Array<string>

const see = (text: string | RegExp, timeout = 60_000, within: Page | Locator = page) => within.getByText(text).first().waitFor({ state: "visible", timeout })
const as = () => ({ token: owner.user_token })
/** Reads the API until `check` holds (what the page did is committed by the time its answer shows, but read anyway). */
const eventually = async <T,>(read: () => Promise<T>, check: (value: T) => boolean) => {
  for (let attempt = 0; ; attempt++) {
    const value = await read()
    if (check(value)) return value
    expect(attempt, JSON.stringify(value)).toBeLessThan(200)
    await Bun.sleep(50)
  }
}

describe.sequential("the dashboard's management pages in a browser", () => {
  beforeAll(async () => {
    registry = startRegistry()
    registry.push("test/alpine", "3.20", { layers: [alpineLike()] })
    // The test registry is on loopback, which registry requests may reach only when the operator allows it.
    server = await startServer({ env: { REGISTRY_ALLOW_PRIVATE: "true" } })
    http = api(server.url)
    owner = await bootstrap(server.dataDir, "morgan@example.com")
    chromium = await openBrowser()
    context = await chromium.browser.newContext({ viewport: { width: 1280, height: 860 } })
    ;({ page, errors } = await newPage(context))
  }, STEP_MS)

  afterAll(async () => {
    await chromium?.close()
    await server?.stop()
    registry?.stop()
  }, STEP_MS)

  it("signs in with a pasted token, which the page keeps nowhere; a wrong one shows the API's message and code", async () => {
    await page.goto(`${server.url}/login`)
    const form = page.getByRole("form", { name: "Sign in with a token" })
    await form.getByLabel("User access token").fill(`metal_ut_${"x".repeat(43)}`)
    await form.getByRole("button", { name: "Sign in" }).click()
    const refused = form.getByRole("alert")
    await see("Unknown, revoked or expired user access token", 30_000, refused)
    expect(await refused.textContent()).toContain("unauthenticated")
    await form.getByLabel("User access token").fill(owner.user_token)
    await form.getByRole("button", { name: "Sign in" }).click()
    await page.waitForURL(new RegExp(`/p/${owner.project_id}$`))
    await see("morgan@example.com")
    // The token went into a session cookie (HttpOnly): nothing of it in the page's storage or its cookies.
    expect(await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie])).toEqual([0, 0, ""])
    expect((await context.cookies(server.url)).map((c) => c.name)).toEqual(["metal_gw_session"])
    // The keyboard's first stop skips the header to the content.
    await page.keyboard.press("Tab")
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Skip to content")
  }, STEP_MS)

  it("renames and deletes a project behind its name; a taken slug is refused with the API's code", async () => {
    await page.goto(`${server.url}/o/${owner.organization_id}`)
    const create = page.getByRole("form", { name: "Create project" })
    await create.getByLabel("Name").fill("Scratch")
    await create.getByRole("button", { name: "Create project" }).click()
    await page.waitForURL(/\/p\/prj_[a-z0-9]+$/)
    const scratchId = page.url().split("/p/")[1]!
    await page.goto(`${server.url}/o/${owner.organization_id}`)
    await create.getByLabel("Name").fill("Scratch")
    await create.getByRole("button", { name: "Create project" }).click()
    await see('The slug "scratch" is already used by another project of this organization', 30_000, create)
    expect(await create.getByRole("alert").textContent()).toContain("conflict")

    const row = page.getByRole("row").filter({ hasText: scratchId })
    await row.getByRole("button", { name: "Rename" }).click()
    const rename = row.getByRole("form", { name: "Rename Scratch" })
    await rename.getByLabel("Name").fill("Scratch two")
    await rename.getByRole("button", { name: "Save" }).click()
    await row.getByRole("link", { name: "Scratch two" }).waitFor()
    expect((await http.get(`/v1/projects/${scratchId}`, as())).body.name).toBe("Scratch two")
    await shot(page, "projects")

    await row.getByRole("button", { name: "Delete" }).click()
    const dialog = row.getByRole("dialog", { name: "Delete project Scratch two" })
    const confirm = dialog.getByRole("button", { name: "Delete" })
    expect(await confirm.isDisabled()).toBe(true)
    await dialog.getByLabel("Type Scratch two to confirm").fill("Scratch tw")
    expect(await confirm.isDisabled()).toBe(true)
    await dialog.getByLabel("Type Scratch two to confirm").fill("Scratch two")
    await confirm.click()
    await row.waitFor({ state: "detached" })
    expect((await http.get(`/v1/projects/${scratchId}`, as())).status).toBe(404)
  }, STEP_MS)

  it("makes an organization, renames it, stores and removes a provider's own credentials there, and deletes it behind its name", async () => {
    await page.goto(`${server.url}/o/${owner.organization_id}`)
    const create = page.getByRole("form", { name: "Create organization" })
    await create.getByLabel("Organization name").fill("Side org")
    await create.getByRole("button", { name: "Create organization" }).click()
    await page.waitForURL((url) => url.pathname.startsWith("/o/") && url.pathname !== `/o/${owner.organization_id}`)
    const orgId = page.url().split("/o/")[1]!
    await page.locator("h1", { hasText: "Side org" }).waitFor()
    const rename = page.getByRole("form", { name: "Rename organization" })
    await rename.getByLabel("Name").fill("Side org renamed")
    await rename.getByRole("button", { name: "Save" }).click()
    await page.locator("h1", { hasText: "Side org renamed" }).waitFor()
    expect((await http.get(`/v1/organizations/${orgId}`, as())).body.name).toBe("Side org renamed")

    // BYOK: the fields the provider's credentials take (the secret as a password field), stored, then removed.
    await page.getByRole("link", { name: "Providers", exact: true }).click()
    const e2b = page.getByRole("row").filter({ has: page.getByRole("cell", { name: "e2b", exact: true }) }).first()
    await e2b.getByRole("button", { name: "Add" }).click()
    const form = page.getByRole("form", { name: "e2b credentials" })
    expect(await form.getByLabel("api_key").getAttribute("type")).toBe("password")
    await form.getByLabel("api_key").fill("e2b_browser_test_key_0123456789")
    await form.getByRole("button", { name: "Save credentials" }).click()
    await see(/yours, since/, 30_000, e2b)
    const stored = await http.get(`/v1/organizations/${orgId}/provider-credentials`, as())
    expect(stored.body.provider_credentials.map((c: { provider: string }) => c.provider)).toEqual(["e2b"])
    expect(stored.text).not.toContain("e2b_browser_test_key_0123456789")
    await shot(page, "provider-credentials", { docs: false })
    await e2b.getByRole("button", { name: "Remove the e2b credentials" }).click()
    await see("emulated", 30_000, e2b)
    expect((await http.get(`/v1/organizations/${orgId}/provider-credentials`, as())).body.provider_credentials).toEqual([])

    await page.getByRole("link", { name: "Projects", exact: true }).click()
    await page.getByRole("button", { name: "Delete organization" }).click()
    const dialog = page.getByRole("dialog", { name: "Delete organization Side org renamed" })
    const confirm = dialog.getByRole("button", { name: "Delete organization" })
    expect(await confirm.isDisabled()).toBe(true)
    await dialog.getByLabel("Type Side org renamed to confirm").fill("Side org renamed")
    await confirm.click()
    // Gone: the page goes home, to the first organization's first project.
    await page.waitForURL(new RegExp(`/p/${owner.project_id}$`))
    expect((await http.get(`/v1/organizations/${orgId}`, as())).status).toBe(404)
  }, STEP_MS)

  it("invites someone, changes the invitation's role, and revokes it", async () => {
    await page.goto(`${server.url}/o/${owner.organization_id}/members`)
    const invite = page.getByRole("form", { name: "Invite someone" })
    await invite.getByLabel("Email").fill("pat@example.com")
    await invite.getByRole("button", { name: "Invite" }).click()
    const role = page.getByRole("combobox", { name: "Role of the invitation to pat@example.com" })
    await role.waitFor()
    const invitations = () => http.get(`/v1/organizations/${owner.organization_id}/members`, as()).then((r) => r.body.invitations as Array<{ email: string; role: string; status: string }>)
    expect((await invitations()).find((i) => i.email === "pat@example.com")?.role).toBe("member")
    await role.selectOption("admin")
    await eventually(invitations, (list) => list.find((i) => i.email === "pat@example.com")?.role === "admin")
    await shot(page, "invitations", { docs: false })
    await page.getByRole("button", { name: "Revoke the invitation to pat@example.com" }).click()
    await see("No pending invitations.")
    expect((await invitations()).filter((i) => i.email === "pat@example.com" && i.status === "pending")).toEqual([])
  }, STEP_MS)

  it("saves the auto top-up settings; bad amounts and enabling without a payment method are refused with the API's words", async () => {
    await page.goto(`${server.url}/o/${owner.organization_id}/billing`)
    const form = page.getByRole("form", { name: "Auto top-up" })
    await form.getByLabel("When the balance falls below ($)").fill("5.00")
    await form.getByLabel("Add ($)").fill("20.00")
    await form.getByLabel("At most per month ($)").fill("10.00")
    await form.getByRole("button", { name: "Save auto top-up" }).click()
    await see("Invalid auto top-up settings", 30_000, form)
    await see("must be at least refill_usd", 30_000, form)
    await form.getByLabel("At most per month ($)").fill("100.00")
    await form.getByRole("button", { name: "Save auto top-up" }).click()
    const billing = () => http.get(`/v1/organizations/${owner.organization_id}/billing`, as()).then((r) => r.body.auto_topup)
    expect(await eventually(billing, (a) => a.monthly_cap_usd === "100.00")).toMatchObject({ enabled: false, threshold_usd: "5.00", refill_usd: "20.00" })
    await form.getByLabel("Enabled").check()
    await form.getByRole("button", { name: "Save auto top-up" }).click()
    await see("Auto top-up needs a saved payment method", 30_000, form)
    expect(await form.getByRole("alert").textContent()).toContain("conflict")
    expect((await billing()).enabled).toBe(false)
  }, STEP_MS)

  it("explains, provider by provider, why nothing can serve a request", async () => {
    await page.goto(`${server.url}/p/${owner.project_id}/new`)
    await page.getByLabel("vCPU").fill("512")
    await page.getByRole("button", { name: "Create sandbox" }).click()
    await see("Why each provider did not take it", 90_000)
    await see("no_eligible_provider")
    const reasons = page.locator("table", { has: page.getByText("Why each provider did not take it") }).locator("tbody tr")
    expect(await reasons.count()).toBeGreaterThanOrEqual(5)
    await shot(page, "no-provider-fits")
  }, STEP_MS)

  it("pulls an OCI image into a sandbox, the pull's progress shown as it goes", async () => {
    await page.goto(`${server.url}/p/${owner.project_id}/new`)
    await page.getByRole("combobox", { name: /^Kind\b/ }).selectOption("oci_image")
    await page.getByRole("textbox", { name: /^Image\b/ }).fill(`${registry.host}/test/alpine:3.20`)
    await page.getByRole("combobox", { name: /^Provider\b/ }).selectOption("daytona")
    await page.getByRole("button", { name: "Create sandbox" }).click()
    await page.waitForURL(/\/sandboxes\/sbx_[a-z0-9]+/)
    const steps = page.locator(".steps")
    await steps.getByText(`Pulling ${registry.host}/test/alpine:3.20: 1 layers`).waitFor({ timeout: 90_000 })
    await steps.getByText(/^.*Layer [0-9a-f]{12} fetched/).waitFor()
    await steps.getByText(`Image ${registry.host}/test/alpine:3.20 pulled`).waitFor()
    await page.locator("h1 .badge").filter({ hasText: /^ready$/ }).waitFor({ timeout: 90_000 })
    expect(registry.blobGets.size).toBeGreaterThan(0)
    await shot(page, "image-pull", { docs: false })
  }, STEP_MS)

  it("offers Pause only where the sandbox's provider can pause, and says so", async () => {
    await page.goto(`${server.url}/p/${owner.project_id}/new`)
    await page.getByRole("combobox", { name: /^Provider\b/ }).selectOption("cloudflare")
    await page.getByLabel("A terminal (pty) for this sandbox").uncheck()
    await page.getByRole("button", { name: "Create sandbox" }).click()
    await page.waitForURL(/\/sandboxes\/sbx_[a-z0-9]+/)
    await page.locator("h1 .badge").filter({ hasText: /^ready$/ }).waitFor({ timeout: 90_000 })
    // The manifest read (GET …/capabilities): Cloudflare cannot pause, so there is no Pause button to press.
    await see("not offered by cloudflare")
    expect(await page.getByRole("button", { name: "Pause" }).count()).toBe(0)
    await page.getByRole("button", { name: "Destroy" }).waitFor()
  }, STEP_MS)

  it("opens and deletes a file, cancels a process, pauses, resumes, extends and destroys a sandbox; the list's filters follow its state", async () => {
    await page.goto(`${server.url}/p/${owner.project_id}/new`)
    await page.getByRole("combobox", { name: /^Provider\b/ }).selectOption("e2b")
    await page.getByRole("button", { name: "Create sandbox" }).click()
    await page.waitForURL(/\/sandboxes\/sbx_[a-z0-9]+/)
    const id = new URL(page.url()).pathname.split("/").at(-1)!
    const badge = page.locator("h1 .badge")
    await badge.filter({ hasText: /^ready$/ }).waitFor({ timeout: 90_000 })

    // A file uploaded, opened as text, deleted.
    await page.getByRole("tab", { name: "Files" }).click()
    await page.getByLabel("Upload a file").setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("written from the browser\n") })
    const file = page.locator("tr[data-path='/workspace/notes.txt']")
    await file.waitFor({ timeout: 60_000 })
    await file.getByRole("button", { name: "notes.txt", exact: true }).click()
    await page.locator(".card pre", { hasText: "written from the browser" }).waitFor()
    await file.getByRole("button", { name: "Delete notes.txt" }).click()
    await file.waitFor({ state: "detached", timeout: 60_000 })
    // A long process, its output live, cancelled while it runs.
    await page.getByRole("tab", { name: "Processes" }).click()
    await page.getByRole("textbox", { name: "Command" }).fill("echo long-one-$((6*7)); sleep 300")
    await page.getByRole("button", { name: "Run" }).click()
    const output = page.locator(".output")
    await output.getByText("long-one-42").waitFor({ timeout: 60_000 })
    await output.getByRole("button", { name: "Cancel" }).click()
    await output.locator("h3", { hasText: "cancelled" }).waitFor({ timeout: 60_000 })
    await shot(page, "process-cancelled", { docs: false })

    await page.getByRole("button", { name: "Pause" }).click()
    await badge.filter({ hasText: /^paused$/ }).waitFor({ timeout: 90_000 })
    await page.getByRole("button", { name: "Resume" }).click()
    await badge.filter({ hasText: /^ready$/ }).waitFor({ timeout: 90_000 })

    const before = Date.parse((await http.get(`/v1/projects/${owner.project_id}/sandboxes/${id}`, as())).body.expires_at)
    await page.getByLabel("Extend the runtime to (seconds from now)").fill("7200")
    await page.getByRole("button", { name: "Extend" }).click()
    const extended = await eventually(() => http.get(`/v1/projects/${owner.project_id}/sandboxes/${id}`, as()), (r) => Date.parse(r.body.expires_at) > before)
    expect(Date.parse(extended.body.expires_at)).toBeGreaterThan(Date.now() + 3600_000)
    await shot(page, "sandbox-actions", { docs: false })

    await page.getByRole("button", { name: "Destroy" }).click()
    const dialog = page.getByRole("dialog", { name: "Destroy this sandbox" })
    await dialog.getByLabel(`Type ${id} to confirm`).fill(id)
    await dialog.getByRole("button", { name: "Destroy" }).click()
    await badge.filter({ hasText: /^stopped$/ }).waitFor({ timeout: 90_000 })

    await page.getByRole("link", { name: "Sandboxes", exact: true }).first().click()
    const row = page.locator(`tr[data-sandbox='${id}']`)
    await row.waitFor()
    await page.getByRole("combobox", { name: /^State\b/ }).selectOption("ready")
    await row.waitFor({ state: "detached" })
    await page.getByRole("combobox", { name: /^State\b/ }).selectOption("paused")
    await see("No sandbox matches these filters.")
    await page.getByRole("combobox", { name: /^State\b/ }).selectOption("stopped")
    await row.waitFor()
    await page.getByRole("combobox", { name: /^Provider\b/ }).selectOption("modal")
    await row.waitFor({ state: "detached" })
    await page.getByRole("combobox", { name: /^Provider\b/ }).selectOption("e2b")
    await row.waitFor()
  }, STEP_MS)

  it("revokes an API key (refused from then on) and deletes it", async () => {
    await page.getByRole("link", { name: "API keys" }).click()
    await page.getByLabel("Name").fill("short-lived")
    await page.getByRole("button", { name: "Create key" }).click()
    const key = (await page.locator("[data-secret=api-key]").textContent())!.trim()
    await page.getByRole("button", { name: "Close" }).click()
    expect((await http.get("/v1/sandboxes", { token: key, project: owner.project_id })).status).toBe(200)
    const row = page.getByRole("row").filter({ hasText: "short-lived" })
    await row.getByRole("button", { name: "Revoke short-lived" }).click()
    await see("revoked", 30_000, row)
    const refused = await http.get("/v1/sandboxes", { token: key, project: owner.project_id })
    expect([refused.status, refused.body.code]).toEqual([401, "unauthenticated"])
    await row.getByRole("button", { name: "Delete short-lived" }).click()
    await row.waitFor({ state: "detached" })
    expect(errors).toEqual([])
  }, STEP_MS)
})
