/**
 * Where a webhook may be delivered (docs/guide/webhooks.md, URL policy): the gateway's one outbound address policy
 * (src/net/Targets.ts, over src/domain/Addresses.ts) with webhooks' settings. A URL is checked when an endpoint is
 * created or changed and again before every attempt: its host is resolved once, every address it resolves to must
 * be allowed, and the attempt then connects to exactly that address (Send.ts). WEBHOOK_ALLOW_PRIVATE_TARGETS=true
 * also allows loopback, private, shared and link-local addresses; metadata addresses stay refused whatever the
 * setting. WEBHOOK_DNS_SERVERS names the resolvers.
 */
import { Context, Effect, Layer } from "effect"
import { WebhookConfig } from "../../Config.ts"
import { validationError } from "../../domain/Errors.ts"
import { checkUrl, makeResolver, type Resolver, type TargetCheck } from "../../net/Targets.ts"

/** How webhook hosts are resolved (tests give their own answers). */
export class WebhookResolver extends Context.Tag("app/WebhookResolver")<WebhookResolver, Resolver>() {}

/** The system resolver (getaddrinfo: /etc/hosts, then DNS), or WEBHOOK_DNS_SERVERS when set. */
export const WebhookResolverLive = Layer.effect(WebhookResolver, Effect.map(WebhookConfig, (config) => makeResolver(config.dnsServers)))

/** The URL policy with the webhook settings; resolves the host once. */
export const checkTarget = (raw: string): Effect.Effect<TargetCheck, never, WebhookConfig | WebhookResolver> =>
  Effect.gen(function*() {
    const config = yield* WebhookConfig
    const resolver = yield* WebhookResolver
    return yield* checkUrl(raw, { allowPrivate: config.allowPrivateTargets, purpose: "webhooks", setting: "WEBHOOK_ALLOW_PRIVATE_TARGETS", resolver })
  })

/**
 * The check at create and update: a refused URL is a 422 naming the rule. A name that does not resolve now is
 * accepted (DNS may be down); every attempt checks again and fails (and retries) until it resolves to an allowed
 * address.
 */
export const requireAllowedUrl = (raw: string) =>
  Effect.flatMap(checkTarget(raw), (checked) =>
    checked._tag === "Refused"
      ? Effect.fail(validationError("The webhook URL is not allowed", [{ path: "url", message: checked.reason }]))
      : Effect.void)
