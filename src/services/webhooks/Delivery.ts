/**
 * The `webhook.deliver` job (docs/guide/webhooks.md): one attempt per run, never inside a transaction. Each attempt
 * reads the endpoint as it is now (its current URL and secret: a rotation applies from the next attempt), checks
 * and resolves the URL (Targets.ts), signs and POSTs the delivery's fixed body to the checked address (Send.ts),
 * and records the attempt, the delivery's new status and the endpoint's last delivery in one transaction.
 *
 * - 2xx succeeds. Network errors, timeouts, 408, 429 and 5xx are retried with backoff min(base × 2^(n−1), max) ×
 *   [0.5, 1.5) — a larger `Retry-After` is honoured up to 10 minutes — until the attempts run out; anything else
 *   (other 4xx, a 3xx: redirects are not followed, a refused address) fails at once.
 * - The job asks the runner to run it again at the next attempt's time (same job, same delivery id), so a crash
 *   at any point leaves a due job behind; a delivery found finished is not sent again.
 * - An endpoint whose attempts have all failed for WEBHOOK_DISABLE_AFTER_SECONDS (a day), and at least 20 in a
 *   row, is disabled, with a reason and a `webhook.endpoint_disabled` event to the organization's other endpoints.
 */
import { Effect } from "effect"
import { WebhookConfig, type WebhookConfigShape } from "../../Config.ts"
import { Db } from "../../db/Db.ts"
import { repositories } from "../../db/Database.ts"
import { type DeliveryRow, WebhookDeliveriesRepo } from "../../db/repos/WebhookDeliveries.ts"
import { type WebhookRow, WebhooksRepo } from "../../db/repos/Webhooks.ts"
import type { ErrorObject } from "../../domain/Errors.ts"
import { isoAfter, nowIso } from "../../domain/Time.ts"
import { signatureHeader } from "../../domain/WebhookSignature.ts"
import { SecretBox } from "../Crypto.ts"
import { appendEvent } from "../Events.ts"
import type { JobHandler } from "../JobRegistry.ts"
import { send } from "./Send.ts"
import { checkTarget, WebhookResolver } from "./Targets.ts"

/** How many deliveries run at once, in the runner's webhook lane (apart from sandbox work). */
export const DELIVERY_CONCURRENCY = 8
export const RETRY_AFTER_CAP_MS = 10 * 60 * 1000
/** An endpoint is disabled only after at least this many failed attempts in a row (and the configured time). */
export const DISABLE_MIN_FAILURES = 20
const USER_AGENT = "SandboxGateway-Webhooks/1"

export const isRetryableStatus = (status: number) => status === 408 || status === 429 || status >= 500

/** `Retry-After` as milliseconds from now: delta-seconds or an HTTP date; undefined when absent or malformed. */
export const parseRetryAfter = (value: string | null, nowMs: number): number | undefined => {
  if (value === null) return undefined
  const trimmed = value.trim()
  if (/^\d{1,10}$/.test(trimmed)) return Number(trimmed) * 1000
  const at = Date.parse(trimmed)
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs)
}

/** The wait before the attempt after attempt `attempt` (1 = the first). */
export const retryDelayMs = (
  attempt: number,
  retryAfterMs: number | undefined,
  config: Pick<WebhookConfigShape, "retryBaseMs" | "retryMaxMs">,
  random: () => number = Math.random
): number => {
  const backoff = Math.min(config.retryBaseMs * 2 ** (attempt - 1), config.retryMaxMs) * (0.5 + random())
  const honoured = Math.max(backoff, Math.min(retryAfterMs ?? 0, RETRY_AFTER_CAP_MS))
  return Math.round(Math.min(honoured, config.retryMaxMs))
}

/** What an attempt came to. */
interface AttemptOutcome {
  readonly ok: boolean
  readonly retryable: boolean
  readonly httpStatus: number | null
  readonly error: string | null
  readonly snippet: string | null
  readonly retryAfterMs: number | undefined
}

const failed = (error: string, retryable: boolean): AttemptOutcome =>
  ({ ok: false, retryable, httpStatus: null, error, snippet: null, retryAfterMs: undefined })

export const makeWebhookDeliveryHandler = Effect.gen(function*() {
  const context = yield* repositories
  const db = yield* Db
  const box = yield* SecretBox
  const config = yield* WebhookConfig
  const resolver = yield* WebhookResolver
  const tx = <A, E, R>(effect: Effect.Effect<A, E, R>) => db.transaction(effect)

  /** Checks the URL, signs and sends; never fails. */
  const attempt = (endpoint: WebhookRow, delivery: DeliveryRow) =>
    Effect.gen(function*() {
      const checked = yield* checkTarget(endpoint.url).pipe(
        Effect.provideService(WebhookConfig, config),
        Effect.provideService(WebhookResolver, resolver)
      )
      if (checked._tag === "Refused") return failed(`refused: ${checked.reason}`, false)
      if (checked._tag === "Unresolved") return failed(checked.reason, true)
      let secret: string
      try {
        secret = box.open(endpoint.secret_ciphertext)
      } catch {
        return failed("the endpoint's signing secret cannot be read", false)
      }
      const timestamp = Math.floor(Date.now() / 1000)
      const result = yield* send({
        target: checked.target,
        body: delivery.body,
        timeoutMs: config.timeoutMs,
        headers: {
          "content-type": "application/json",
          "user-agent": USER_AGENT,
          "metal-delivery-id": delivery.id,
          "metal-event-id": delivery.event_id,
          "metal-event-type": delivery.event_type,
          "metal-signature-timestamp": String(timestamp),
          "metal-signature": signatureHeader(secret, timestamp, delivery.id, delivery.body)
        }
      })
      if (result._tag === "NoResponse") return failed(result.error, true)
      const { status, snippet } = result
      const base = { httpStatus: status, snippet, retryAfterMs: parseRetryAfter(result.retryAfter, Date.now()) }
      if (status >= 200 && status < 300) return { ...base, ok: true, retryable: false, error: null }
      if (status >= 300 && status < 400) return { ...base, ok: false, retryable: false, error: `the receiver answered ${status}; redirects are not followed` }
      return { ...base, ok: false, retryable: isRetryableStatus(status), error: `the receiver answered ${status}` }
    })

  /** After a failed attempt: disables the endpoint when its failure run is long enough (in the record's transaction). */
  const maybeDisable = (endpoint: WebhookRow, run: { consecutive_failures: number; failing_since: string | null; enabled: boolean; deleted_at: string | null }, now: string, lastError: string | null) =>
    Effect.gen(function*() {
      if (!run.enabled || run.deleted_at !== null || run.failing_since === null) return
      if (run.consecutive_failures < DISABLE_MIN_FAILURES) return
      if (isoAfter(run.failing_since, config.disableAfterSeconds) > now) return
      const reason = `Every delivery attempt since ${run.failing_since} failed (${run.consecutive_failures} in a row; the last: ${lastError ?? "unknown"}); re-enable it with PATCH {"enabled": true}`
      if (!(yield* WebhooksRepo.disable(endpoint.id, reason, now))) return
      yield* appendEvent({
        type: "webhook.endpoint_disabled",
        organizationId: endpoint.organization_id,
        data: {
          webhook_id: endpoint.id,
          name: endpoint.name,
          url: endpoint.url,
          disabled_at: now,
          disabled_reason: reason,
          consecutive_failures: run.consecutive_failures,
          failing_since: run.failing_since
        }
      })
      yield* Effect.logWarning("webhook endpoint disabled after failing", { webhook_id: endpoint.id, failures: run.consecutive_failures })
    })

  const deliver = (deliveryId: string) =>
    Effect.gen(function*() {
      const delivery = yield* WebhookDeliveriesRepo.get(deliveryId)
      if (delivery === undefined || delivery.status === "succeeded" || delivery.status === "failed") return
      const endpoint = yield* WebhooksRepo.get(delivery.endpoint_id)
      if (endpoint === undefined || endpoint.deleted_at !== null) {
        return yield* WebhookDeliveriesRepo.abandon(deliveryId, "the webhook endpoint was deleted", yield* nowIso)
      }
      // Test sends go even to a disabled endpoint; events wait for no one.
      if (!endpoint.enabled && !delivery.is_test) {
        return yield* WebhookDeliveriesRepo.abandon(deliveryId, "the webhook endpoint is disabled", yield* nowIso)
      }
      const startedAt = yield* nowIso
      const number = yield* WebhookDeliveriesRepo.startAttempt(deliveryId, startedAt)
      if (number === undefined) return
      const started = performance.now()
      const outcome = yield* attempt(endpoint, delivery)
      const latencyMs = Math.max(0, Math.round(performance.now() - started))
      const now = yield* nowIso
      const status = outcome.ok ? "succeeded" : outcome.retryable && number < config.maxAttempts ? "retrying" : "failed"
      const nextAttemptAt = status === "retrying" ? new Date(Date.parse(now) + retryDelayMs(number, outcome.retryAfterMs, config)).toISOString() : null
      yield* tx(Effect.gen(function*() {
        yield* WebhookDeliveriesRepo.recordAttempt({
          deliveryId,
          startedAt,
          httpStatus: outcome.httpStatus,
          error: outcome.error,
          latencyMs,
          snippet: outcome.snippet,
          status,
          nextAttemptAt,
          now
        })
        if (outcome.ok) return yield* WebhooksRepo.recordSuccess(endpoint.id, now, status)
        const run = yield* WebhooksRepo.recordFailure(endpoint.id, now, status, startedAt)
        if (run !== undefined) yield* maybeDisable(endpoint, run, now, outcome.error)
      }))
      return nextAttemptAt === null ? undefined : { rescheduleAt: nextAttemptAt }
    })

  return {
    run: (job) => Effect.provide(deliver(job.payload.delivery_id), context),
    giveUp: (job, error: ErrorObject) =>
      Effect.provide(
        Effect.flatMap(nowIso, (now) => WebhookDeliveriesRepo.abandon(job.payload.delivery_id, `${error.code}: ${error.message}`, now)),
        context
      )
  } satisfies JobHandler<{ readonly delivery_id: string }>
})
