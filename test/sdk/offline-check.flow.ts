/**
 * The offline harness's own check (test/sdk/e2b.test.ts): E2B's SDK pointed at E2B's real hostnames, as an SDK
 * falls back to them when it is not pointed elsewhere, must fail at once inside the namespace — name resolution
 * and connections have nowhere to go — and so must a plain lookup and fetch. Each of those steps passes only when
 * its request failed with a network error; the first shows the emulator beside it on loopback does answer.
 */
import assert from "node:assert/strict"
import * as dns from "node:dns/promises"
import { Sandbox } from "e2b"
import { describeError, emulatorOf, runFlow } from "./flow.ts"

/** A network failure (resolution or connection), not an answer and not a deadline. */
const NETWORK_FAILURE = /ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ENETUNREACH|EHOSTUNREACH|ConnectionRefused|Unable to connect|getaddrinfo|DNS|resolve|fetch failed|ECONNRESET/i

const failsOnTheNetwork = async (what: string, attempt: () => Promise<unknown>) => {
  const outcome = await attempt().then(() => null, (e: unknown) => e)
  assert.ok(outcome !== null, `${what} reached something`)
  const message = describeError(outcome)
  assert.doesNotMatch(message, /timed? ?out|TimeoutError|aborted/i, `${what} hung until a deadline instead of failing at once: ${message}`)
  assert.match(message, NETWORK_FAILURE, `${what} failed, but not on the network: ${message}`)
}

await runFlow(async ({ step }) => {
  await step("the emulator on loopback answers", async () => {
    const e2b = emulatorOf("e2b")
    const listed = await fetch(`${e2b.urls["api"]}/v2/sandboxes`, { headers: { "x-api-key": e2b.apiKey } })
    assert.equal(listed.status, 200)
    assert.deepEqual(await listed.json(), [])
  })
  await step("resolving E2B's API host fails", () => failsOnTheNetwork("dns.lookup(api.e2b.app)", () => dns.lookup("api.e2b.app")))
  await step("fetching E2B's API fails", () => failsOnTheNetwork("fetch(https://api.e2b.app)", () => fetch("https://api.e2b.app/health", { signal: AbortSignal.timeout(20_000) })))
  await step("the SDK at its default hosts fails", () =>
    failsOnTheNetwork("Sandbox.create at api.e2b.app", () =>
      Sandbox.create({ apiUrl: "https://api.e2b.app", sandboxUrl: "https://sandbox.e2b.app", apiKey: "e2b_0000", requestTimeoutMs: 20_000 })))
})
