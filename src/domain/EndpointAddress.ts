/**
 * Where an endpoint is served (ARCHITECTURE.md §5): never on the API's origin. Two shapes:
 *
 * - path: `<endpoint origin>/e/<endpoint id>/<token>/…` on the endpoint listener (its own port by default);
 * - host: `<scheme>://ep-<id>-<token>.<base host>/…` under ENDPOINT_BASE_URL, one origin per endpoint behind a
 *   wildcard DNS name. A DNS label is case-insensitive and at most 63 characters, so the id's 32 lowercase
 *   characters and a 26-character base32 token (130 bits, lowercase) fit in one label: `ep-` + 32 + `-` + 26 = 62.
 *
 * The token is a capability: only its SHA-256 is stored, so the URL can be handed out once and never rebuilt.
 */
import * as crypto from "node:crypto"
import { Schema } from "effect"
import { EndpointId } from "./Ids.ts"

const BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
export const ENDPOINT_TOKEN_LENGTH = 26

/** 26 characters of lowercase base32 from a CSPRNG (each byte's low 5 bits: unbiased, 32 divides 256). */
export const newEndpointToken = (): string => {
  const bytes = crypto.randomBytes(ENDPOINT_TOKEN_LENGTH)
  let out = ""
  for (const b of bytes) out += BASE32[b & 31]
  return out
}

/** The single DNS label naming an endpoint in host mode. */
export const endpointLabel = (endpointId: string, token: string): string => `ep-${endpointId.replace(/^ep_/, "")}-${token}`

/** The patterns below already give an id its form; this check is what types it (src/domain/Ids.ts). */
const isEndpointId = Schema.is(EndpointId)

const LABEL = new RegExp(`^ep-([a-z0-9]{32})-([a-z2-7]{${ENDPOINT_TOKEN_LENGTH}})$`)

/** The endpoint id and token a host-mode label names, or undefined. */
export const parseEndpointLabel = (label: string): { readonly endpointId: EndpointId; readonly token: string } | undefined => {
  const match = LABEL.exec(label)
  if (match === null) return undefined
  const endpointId = `ep_${match[1]}`
  return isEndpointId(endpointId) ? { endpointId, token: match[2]! } : undefined
}

/** Path mode: the endpoint id, the token (today's, or the longer base64url tokens of earlier versions) and the rest. */
const PATH = /^\/e\/(ep_[A-Za-z0-9]{1,64})\/([A-Za-z0-9_-]{16,128})(\/.*)?$/

export const parseEndpointPath = (
  pathname: string
): { readonly endpointId: EndpointId; readonly token: string; readonly rest: string | undefined } | undefined => {
  const match = PATH.exec(pathname)
  if (match === null) return undefined
  const endpointId = match[1]
  return isEndpointId(endpointId) ? { endpointId, token: match[2]!, rest: match[3] } : undefined
}

export type EndpointAddressing =
  /** `origin`: scheme, host and port only (no path), e.g. `http://127.0.0.1:8081`. */
  | { readonly _tag: "path"; readonly origin: string }
  | { readonly _tag: "host"; readonly scheme: "http" | "https"; readonly baseHost: string; readonly port: string }

/** The URL handed to the client for a new endpoint. */
export const endpointUrl = (addressing: EndpointAddressing, endpointId: string, token: string): string =>
  addressing._tag === "path"
    ? `${addressing.origin}/e/${endpointId}/${token}/`
    : `${addressing.scheme}://${endpointLabel(endpointId, token)}.${addressing.baseHost}${addressing.port === "" ? "" : `:${addressing.port}`}/`
