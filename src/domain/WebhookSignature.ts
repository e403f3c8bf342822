/**
 * Webhook signatures (reference §8): `metal-signature: t=<unix seconds>,v1=<hex HMAC-SHA256>` over
 * `<t>.<delivery id>.<raw body>`, keyed with the endpoint's whole `whsec_…` secret. The delivery id is signed, so
 * a body cannot be replayed under another delivery; receivers reject timestamps more than 5 minutes away.
 */
import * as crypto from "node:crypto"

export const SIGNATURE_TOLERANCE_SECONDS = 300

export const signatureOf = (secret: string, timestamp: number, deliveryId: string, body: string): string =>
  crypto.createHmac("sha256", secret).update(`${timestamp}.${deliveryId}.${body}`).digest("hex")

/** The `metal-signature` header value. */
export const signatureHeader = (secret: string, timestamp: number, deliveryId: string, body: string): string =>
  `t=${timestamp},v1=${signatureOf(secret, timestamp, deliveryId, body)}`

/**
 * What a receiver does: the header's `t` equals `metal-signature-timestamp`, lies within the tolerance of `now`,
 * and one of its `v1` values matches (compared in constant time).
 */
export const verifySignature = (input: {
  readonly secret: string
  readonly deliveryId: string
  readonly body: string
  readonly signature: string
  readonly timestamp: string
  readonly nowSeconds: number
  readonly toleranceSeconds?: number
}): boolean => {
  const parts = input.signature.split(",").map((p) => p.trim().split("="))
  const t = parts.find(([k]) => k === "t")?.[1]
  if (t === undefined || t !== input.timestamp || !/^\d{1,12}$/.test(t)) return false
  if (Math.abs(input.nowSeconds - Number(t)) > (input.toleranceSeconds ?? SIGNATURE_TOLERANCE_SECONDS)) return false
  const expected = Buffer.from(signatureOf(input.secret, Number(t), input.deliveryId, input.body), "hex")
  return parts.some(([k, v]) => k === "v1" && v !== undefined && /^[0-9a-f]{64}$/.test(v) && crypto.timingSafeEqual(Buffer.from(v, "hex"), expected))
}
