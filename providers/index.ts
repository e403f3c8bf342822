/**
 * The provider plugins this gateway is built with, one per folder under `providers/`. A plugin yields its
 * `SandboxProvider` (remote with credentials, else emulated over the local runtime); the registry
 * (`src/providers/registry.ts`) lists them in the canonical order of the eleven identifiers. Adding a provider is adding
 * its plugin here (CONTRIBUTING.md, "Adding a provider").
 */
import { BlaxelPlugin } from "./blaxel/plugin.ts"
import { CloudflarePlugin } from "./cloudflare/plugin.ts"
import { CodeSandboxPlugin } from "./codesandbox/plugin.ts"
import { DaytonaPlugin } from "./daytona/plugin.ts"
import { E2BPlugin } from "./e2b/plugin.ts"
import { FreestylePlugin } from "./freestyle/plugin.ts"
import { ModalPlugin } from "./modal/plugin.ts"
import { NorthflankPlugin } from "./northflank/plugin.ts"
import { PrimePlugin } from "./prime/plugin.ts"
import { RunloopPlugin } from "./runloop/plugin.ts"
import { VercelPlugin } from "./vercel/plugin.ts"

export const PLUGINS = [
  BlaxelPlugin,
  CloudflarePlugin,
  CodeSandboxPlugin,
  DaytonaPlugin,
  E2BPlugin,
  FreestylePlugin,
  ModalPlugin,
  NorthflankPlugin,
  PrimePlugin,
  RunloopPlugin,
  VercelPlugin
] as const
