/**
 * A real headless Chromium for the dashboard's tests (Debian's `chromium`, installed by scripts/ensure-deps.sh),
 * driven by playwright-core — no browser download. One browser per test file, a fresh empty profile (Playwright
 * makes one per launch and removes it), and the flags that keep it off the network (it reaches only the test's
 * own loopback servers).
 *
 * `shot(page, name)` saves a screenshot as the test's artifact under .tmp/dashboard-screenshots/, and with
 * UPDATE_DOCS_SCREENSHOTS=1 also as docs/images/dashboard/<name>.png (the pictures the docs show).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"

const ROOT = path.resolve(import.meta.dirname, "../..")
export const ARTIFACTS = path.join(ROOT, ".tmp/dashboard-screenshots")
const DOCS_IMAGES = path.join(ROOT, "docs/images/dashboard")

export const CHROMIUM = "/usr/bin/chromium"

export interface OpenBrowser {
  readonly browser: Browser
  readonly close: () => Promise<void>
}

export const openBrowser = async (): Promise<OpenBrowser> => {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
  })
  return { browser, close: () => browser.close() }
}

/** A page that fails the test on any script error of the dashboard (a CSP violation included). */
export const newPage = async (context: BrowserContext): Promise<{ page: Page; errors: Array<string> }> => {
  const page = await context.newPage()
  const errors: Array<string> = []
  page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`))
  page.on("console", (m) => {
    if (m.type() === "error" && /Content Security Policy|Refused to/i.test(m.text())) errors.push(`csp: ${m.text()}`)
  })
  return { page, errors }
}

/** Saves the page as the test's artifact; `docs: false` for a step the docs do not show. */
export const shot = async (page: Page, name: string, options: { readonly docs?: boolean } = {}) => {
  fs.mkdirSync(ARTIFACTS, { recursive: true })
  const file = path.join(ARTIFACTS, `${name}.png`)
  await page.screenshot({ path: file, fullPage: false })
  if (process.env["UPDATE_DOCS_SCREENSHOTS"] === "1" && options.docs !== false) {
    fs.mkdirSync(DOCS_IMAGES, { recursive: true })
    fs.copyFileSync(file, path.join(DOCS_IMAGES, `${name}.png`))
  }
  return file
}
