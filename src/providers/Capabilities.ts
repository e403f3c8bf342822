/**
 * The capability manifest as the API shows it (spec §2.8), embedded in processes, runtime operations and
 * endpoints, and derived from a provider's declared `ProviderCapabilities`. A capability the provider lacks
 * shows as `false` / `0` / `[]` rather than being left out, so clients can read every field.
 */
import type { Capabilities } from "../domain/Runtime.ts"
import type { ProviderCapabilities, ProviderName } from "./Provider.ts"

/** The manifest's schema is the API's (`Capabilities`, spec §2.8); this is its type. */
export type CapabilityManifest = typeof Capabilities.Type

/** The manifest of `provider` from its declared capabilities. */
export const capabilitiesToWire = (provider: ProviderName, caps: ProviderCapabilities): CapabilityManifest => ({
  provider,
  version: caps.version,
  lifecycle: { pause: caps.pause, resume: caps.resume },
  process: {
    execute: caps.process?.execute ?? false,
    cancel: caps.process?.cancel ?? false,
    ordered_output: caps.process?.streams ?? false,
    max_timeout_seconds: caps.process?.maxTimeoutSeconds ?? 0,
    max_output_bytes: caps.process?.maxOutputBytes ?? 0
  },
  filesystem: {
    read: caps.files?.read ?? false,
    write: caps.files?.write ?? false,
    write_modes: [...(caps.files?.writeModes ?? [])],
    create_parents: caps.files?.createParents ?? false,
    list: caps.files?.list ?? false,
    delete: caps.files?.delete ?? false,
    max_read_bytes: caps.files?.maxReadBytes ?? 0,
    max_write_bytes: caps.files?.maxWriteBytes ?? 0
  },
  http_endpoints: {
    create: caps.httpEndpoints?.expose ?? false,
    revoke: caps.httpEndpoints?.revoke ?? false,
    max_lease_seconds: caps.httpEndpoints?.maxLeaseSeconds ?? 0
  },
  computer: caps.computer == null ? null : {
    implementation: caps.computer.implementation,
    actions: [...caps.computer.actions],
    screenshot: caps.computer.screenshot === null
      ? { formats: [], max_bytes: 0 }
      : { formats: [...caps.computer.screenshot.formats], max_bytes: caps.computer.screenshot.maxBytes },
    recording: { formats: caps.computer.recording === null ? [] : [...caps.computer.recording.formats] }
  }
})

/**
 * What an emulated provider can honestly claim: its provider's own capabilities, except an `oci_image` source
 * when its emulator does not hand images to the local runtime (`runsImages: false`): such a request is routed to a
 * provider that runs the image, or fails with `no_eligible_provider` saying why — never a ready sandbox on the
 * host's system. The runtime pulls and runs OCI images (src/runtime/oci/); the Daytona, Blaxel and Vercel
 * emulators pass them on, and a pull that fails fails the create with `image_pull_failed`.
 */
export const emulatedCapabilities = (caps: ProviderCapabilities, options: { readonly runsImages: boolean }): ProviderCapabilities => ({
  ...caps,
  sources: caps.sources.filter((source) => options.runsImages || source !== "oci_image")
})
