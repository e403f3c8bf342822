/**
 * Encryption at rest (AES-256-GCM). The key comes from `SECRETS_KEY` (base64 of 32 bytes) or from
 * `DATA_DIR/secret.key`, created with mode 0600 on first start. (Hashing and random tokens: domain/Tokens.ts.)
 */
import { Config, Context, Effect, Layer, Option, Redacted } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { AppConfig } from "../Config.ts"

export interface SecretBoxShape {
  readonly seal: (plaintext: string) => string
  readonly open: (sealed: string) => string
}

export class SecretBox extends Context.Tag("app/SecretBox")<SecretBox, SecretBoxShape>() {}

const makeBox = (key: Buffer): SecretBoxShape => ({
  seal: (plaintext) => {
    const iv = crypto.randomBytes(12)
    const cipher = crypto.createCipheriv("aes-256-gcm", key, iv)
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
    return ["v1", iv.toString("base64url"), cipher.getAuthTag().toString("base64url"), body.toString("base64url")].join(".")
  },
  open: (sealed) => {
    const [version, iv, tag, body] = sealed.split(".")
    if (version !== "v1" || iv === undefined || tag === undefined || body === undefined) {
      throw new Error("sealed value has an unknown format")
    }
    const decipher = crypto.createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url"))
    decipher.setAuthTag(Buffer.from(tag, "base64url"))
    return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString("utf8")
  }
})

const loadKey = (dataDir: string, fromEnv: Option.Option<Redacted.Redacted<string>>): Buffer => {
  if (Option.isSome(fromEnv)) {
    const key = Buffer.from(Redacted.value(fromEnv.value), "base64")
    if (key.length !== 32) throw new Error("SECRETS_KEY must be the base64 encoding of exactly 32 bytes")
    return key
  }
  const file = path.join(dataDir, "secret.key")
  if (!fs.existsSync(file)) {
    // `wx` fails if another process created it in between; then we read theirs.
    try {
      fs.writeFileSync(file, crypto.randomBytes(32).toString("base64"), { mode: 0o600, flag: "wx" })
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    }
  }
  fs.chmodSync(file, 0o600)
  const key = Buffer.from(fs.readFileSync(file, "utf8").trim(), "base64")
  if (key.length !== 32) throw new Error(`${file} must hold the base64 encoding of exactly 32 bytes`)
  return key
}

export const SecretBoxLive = Layer.effect(
  SecretBox,
  Effect.gen(function*() {
    const { dataDir } = yield* AppConfig
    const fromEnv = yield* Config.option(Config.redacted("SECRETS_KEY"))
    return yield* Effect.try({
      try: () => makeBox(loadKey(dataDir, fromEnv)),
      catch: (e) => new Error(`cannot load the secrets key: ${(e as Error).message}`)
    }).pipe(Effect.orDie)
  })
)
