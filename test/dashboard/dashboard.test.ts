/**
 * The dashboard in a real headless Chromium against a real gateway (one server and one browser for the file, the
 * steps in order as a person would take them): sign in by a one-time link, make a project and a key, create a
 * sandbox and watch it become ready without reloading, type `echo hi` into its terminal, upload a file and
 * download it byte-exact, expose a port and open it, see a webhook delivery with its payload and response, and
 * sign out — after which the old cookie is refused. Each step saves a screenshot (test/support/browser.ts).
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { BrowserContext, Cookie, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newPage, openBrowser, type OpenBrowser, shot } from "../support/browser.ts"
import { api, type Bootstrap, bootstrap, type RunningServer, runCli, startServer } from "../support/server.ts"
import { type Receiver, startReceiver } from "../support/webhooks.ts"

const STEP_MS = 120_000

let server: RunningServer
let owner: Bootstrap
let receiver: Receiver
let chromium: OpenBrowser
let context: BrowserContext
let page: Page
let errors: Array<string>
let projectId: string
let sandboxUrl: string

/** What the page shows: waits until `text` is visible anywhere (Playwright's own polling of the DOM). */
const see = (text: string | RegExp, timeout = 60_000) => page.getByText(text).first().waitFor({ state: "visible", timeout })

describe.sequential("the dashboard in a browser", () => {
  beforeAll(async () => {
    receiver = startReceiver()
    server = await startServer({ env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" } })
    owner = await bootstrap(server.dataDir, "dana@example.com")
    chromium = await openBrowser()
    context = await chromium.browser.newContext({ viewport: { width: 1280, height: 860 }, acceptDownloads: true })
    ;({ page, errors } = await newPage(context))
  }, STEP_MS)

  afterAll(async () => {
    await chromium?.close()
    receiver?.stop()
    await server?.stop()
  }, STEP_MS)

  it("signs in with a one-time link from the CLI", async () => {
    const link = await runCli(server.dataDir, ["login-link", "--email", "dana@example.com"], { PUBLIC_URL: server.url })
    expect(link.code, link.stderr).toBe(0)
    const url = link.stdout.trim()
    expect(url).toMatch(new RegExp(`^${server.url}/login#code=metal_ll_`))
    await page.goto(url)
    await see("dana@example.com")
    // Signed in, then sent to the first project; the code left the address bar.
    await page.waitForURL(new RegExp(`/p/${owner.project_id}$`))
    await see("No sandboxes yet")
    const cookies = await context.cookies(server.url)
    const session = cookies.find((c) => c.name === "metal_gw_session")
    expect(session).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/" })
    expect(await page.evaluate(() => document.cookie)).toBe("")
    await shot(page, "sandboxes-empty")
  }, STEP_MS)

  it("creates a project and an API key that works", async () => {
    await page.getByRole("link", { name: "Projects" }).click()
    await see("New project")
    await page.getByLabel("Name").first().fill("Browser tests")
    await page.getByRole("button", { name: "Create project" }).click()
    await page.waitForURL(/\/p\/prj_[a-z0-9]+$/)
    projectId = page.url().split("/p/")[1]!
    expect(projectId).not.toBe(owner.project_id)
    await page.getByRole("link", { name: "API keys" }).click()
    await page.getByLabel("Name").fill("ci")
    await page.getByRole("button", { name: "Create key" }).click()
    const secret = page.locator("[data-secret=api-key]")
    await secret.waitFor()
    const key = (await secret.textContent())!.trim()
    expect(key).toMatch(/^metal_sk_/)
    await shot(page, "api-key-created")
    // The key shown once is the project's: it lists the (empty) project's sandboxes.
    const listed = await api(server.url).get("/v1/sandboxes", { token: key, project: projectId })
    expect(listed.status).toBe(200)
    expect(listed.body.sandboxes).toEqual([])
    await page.getByRole("button", { name: "Close" }).click()
    await see("ci")
    await shot(page, "api-keys")
  }, STEP_MS)

  it("creates a sandbox and watches it become ready without reloading", async () => {
    await page.getByRole("link", { name: "Sandboxes" }).click()
    await page.getByRole("link", { name: "New sandbox" }).click()
    await page.getByLabel("Metadata (optional)").fill("suite=browser")
    // The port the sandbox will serve: placed where endpoints can be exposed.
    await page.getByLabel("Ports to expose (optional)").fill("8000")
    await shot(page, "new-sandbox")
    // Marks this document: a reload would lose it.
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1))
    await page.getByRole("button", { name: "Create sandbox" }).click()
    await page.waitForURL(/\/sandboxes\/sbx_[a-z0-9]+/)
    sandboxUrl = page.url().split("?")[0]!
    await page.locator("h1 .badge", { hasText: "ready" }).waitFor({ timeout: 90_000 })
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(1)
    await see(/Operation succeeded/)
    await shot(page, "sandbox-ready")
    // The list shows it ready too, with its metadata.
    await page.getByRole("link", { name: "Sandboxes", exact: true }).first().click()
    await page.locator("tr[data-sandbox]", { hasText: "ready" }).waitFor()
    await see("suite=browser")
    await shot(page, "sandboxes")
  }, STEP_MS)

  it("runs echo hi in the terminal and shows its output", async () => {
    await page.goto(sandboxUrl)
    await page.getByRole("tab", { name: "Terminal" }).click()
    await see(/Attached to proc_/)
    await page.locator(".term-host").click()
    await page.keyboard.type("echo hi\n")
    // The command's output is a row of its own (the typed line echoes as `… echo hi`).
    await page.waitForFunction(() => [...document.querySelectorAll(".xterm-rows > div")].some((row) => row.textContent?.replaceAll("\u00a0", " ").trim() === "hi"), undefined, { timeout: 30_000 })
    const rows = await page.locator(".xterm-rows > div").allTextContents()
    expect(rows.map((r) => r.replaceAll("\u00a0", " ").trimEnd())).toContain("hi")
    await shot(page, "terminal")
  }, STEP_MS)

  it("uploads a file with progress, lists it, and downloads it byte-exact", async () => {
    await page.getByRole("tab", { name: "Files" }).click()
    await see("Directory")
    const bytes = crypto.randomBytes(3 * 1024 * 1024 + 17)
    // Every progress line the page shows is noted (the upload may be over before a look at the page).
    await page.evaluate(() => {
      const seen: Array<string> = ((window as unknown as { progress: Array<string> }).progress = [])
      new MutationObserver(() => document.querySelectorAll(".upload").forEach((e) => seen.push(e.textContent ?? ""))).observe(document.body, { subtree: true, childList: true, characterData: true })
    })
    await page.getByLabel("Upload a file").setInputFiles({ name: "blob.bin", mimeType: "application/octet-stream", buffer: bytes })
    const row = page.locator("tr[data-path='/workspace/blob.bin']")
    await row.waitFor({ timeout: 60_000 })
    const progress = await page.evaluate(() => (window as unknown as { progress: Array<string> }).progress)
    expect(progress.some((line) => /Uploading blob\.bin: .* of 3\.0 MB/.test(line)), progress.join("\n")).toBe(true)
    await shot(page, "files")
    const [download] = await Promise.all([page.waitForEvent("download"), row.getByRole("link", { name: "Download" }).click()])
    const saved = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sgw-download-")), "blob.bin")
    await download.saveAs(saved)
    expect(download.suggestedFilename()).toBe("blob.bin")
    const back = fs.readFileSync(saved)
    expect(back.length).toBe(bytes.length)
    expect(back.equals(bytes)).toBe(true)
  }, STEP_MS)

  it("exposes a port and opens it", async () => {
    await page.getByRole("tab", { name: "Processes" }).click()
    await page.getByRole("textbox", { name: "Command" }).fill("mkdir -p /tmp/site && echo hello-from-the-sandbox > /tmp/site/index.html && cd /tmp/site && exec python3 -m http.server 8000")
    await page.getByRole("button", { name: "Run" }).click()
    await page.getByRole("tab", { name: "Endpoints" }).click()
    await page.getByRole("spinbutton", { name: "Port" }).fill("8000")
    await page.getByRole("button", { name: "Expose" }).click()
    const link = page.locator("tr[data-endpoint] a[target=_blank]")
    await link.waitFor({ timeout: 60_000 })
    await see(/\d+m \d\ds/)
    await shot(page, "endpoints")
    const href = (await link.getAttribute("href"))!
    expect(href.startsWith(server.url)).toBe(false)
    const [opened] = await Promise.all([context.waitForEvent("page"), link.click()])
    // The server in the sandbox may still be starting: the page is read again until it answers.
    for (let attempt = 0; !(await opened.content()).includes("hello-from-the-sandbox"); attempt++) {
      expect(attempt, await opened.content()).toBeLessThan(100)
      await new Promise((r) => setTimeout(r, 200))
      await opened.reload()
    }
    await opened.close()
  }, STEP_MS)

  it("shows the metrics as charts", async () => {
    await page.getByRole("tab", { name: "Metrics" }).click()
    await page.locator(".chart canvas").first().waitFor()
    await see(/Source: this host's runtime/)
    // A few readings, so the charts draw lines.
    await page.waitForFunction(() => Number(document.querySelector("[data-samples]")?.getAttribute("data-samples")) >= 4, undefined, { timeout: 30_000 })
    await shot(page, "metrics")
  }, STEP_MS)

  it("sends a webhook test and shows its delivery with the payload and the response", async () => {
    receiver.on("/hook", () => new Response("thanks from the receiver", { status: 200 }))
    await page.getByRole("link", { name: "Webhooks" }).click()
    await page.getByLabel("Name").fill("receiver")
    await page.getByLabel("URL").fill(receiver.url("/hook"))
    await page.getByRole("button", { name: "Add endpoint" }).click()
    await see("Copy it now")
    await page.getByRole("button", { name: "Close" }).click()
    await page.getByRole("button", { name: "Send test" }).click()
    await receiver.waitFor((r) => r.some((x) => x.path === "/hook"))
    const delivery = page.locator("[data-delivery]").first()
    for (let attempt = 0; !(await delivery.textContent().catch(() => ""))?.includes("HTTP 200"); attempt++) {
      expect(attempt).toBeLessThan(100)
      await page.getByRole("button", { name: "Refresh" }).click()
      await new Promise((r) => setTimeout(r, 200))
    }
    await delivery.locator("summary").click()
    await see("thanks from the receiver")
    // The payload shown is the body the receiver got.
    const shown = JSON.parse((await delivery.locator("pre").first().textContent())!)
    expect(shown).toEqual(JSON.parse(receiver.at("/hook")[0]!.body))
    await shot(page, "webhooks")
  }, STEP_MS)

  it("shows billing, usage, members and providers", async () => {
    for (const [link, heading, name] of [["Billing", "Balance", "billing"], ["Usage", "By provider", "usage"], ["Members", "Invitations", "members"], ["Providers", "What each provider can do", "providers"]] as const) {
      await page.getByRole("link", { name: link, exact: true }).click()
      await see(heading)
      await shot(page, name)
    }
  }, STEP_MS)

  it("works at 390 px wide", async () => {
    const { page: phone, errors: phoneErrors } = await newPage(await chromium.browser.newContext({ viewport: { width: 390, height: 844 }, storageState: await context.storageState() }))
    await phone.goto(sandboxUrl)
    await phone.locator("h1 .badge").waitFor()
    const width = await phone.evaluate(() => document.documentElement.scrollWidth)
    expect(width).toBeLessThanOrEqual(390)
    await phone.getByRole("button", { name: "Menu" }).click()
    await phone.getByRole("link", { name: "API keys" }).waitFor()
    await shot(phone, "phone-sandbox")
    expect(phoneErrors).toEqual([])
    await phone.context().close()
  }, STEP_MS)

  it("signs out, after which the old cookie is refused", async () => {
    const before: Cookie = (await context.cookies(server.url)).find((c) => c.name === "metal_gw_session")!
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.waitForURL(/\/login$/)
    await see("Sign in to Sandbox Gateway")
    await shot(page, "sign-in")
    const replayed = await api(server.url).get("/v1/sessions/current", { headers: { cookie: `${before.name}=${before.value}` } })
    expect(replayed.status).toBe(401)
    expect(replayed.body.code).toBe("unauthenticated")
    expect(errors).toEqual([])
  }, STEP_MS)
})
