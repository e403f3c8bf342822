/** Why an image could not be pulled, in the user's terms (the runtime turns it into RuntimeError `image_pull_failed`). */
export type ImagePullReason =
  | "invalid_reference"
  | "unknown_image"
  | "unknown_tag"
  | "unauthorized"
  | "unreachable"
  | "wrong_platform"
  | "too_large"
  | "cache_full"
  | "forbidden_address"
  | "digest_mismatch"
  | "unsupported"
  | "unsafe_layer"
  | "invalid_image"
  /** Its config's User names a user or group its /etc/passwd or /etc/group does not have. */
  | "unknown_user"

export class ImagePullError extends Error {
  constructor(
    readonly reason: ImagePullReason,
    message: string,
    /** For the operator's log only. */
    readonly detail?: string
  ) {
    super(message)
  }
}
