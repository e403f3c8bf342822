/** The gateway's version: package.json's, one place for `/v1/meta`, the MCP server and `--version`. */
import manifest from "../../package.json" with { type: "json" }

export const GATEWAY_VERSION: string = manifest.version
