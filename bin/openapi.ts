/** Prints the OpenAPI 3.1 document: `bun run openapi` (served routes) or `bun run openapi --contract` (all declared). */
import { OpenApi } from "@effect/platform"
import { Api } from "../src/http/Api.ts"
import { ContractApi } from "../src/http/Contract.ts"

const api = process.argv.includes("--contract") ? ContractApi : Api
console.log(JSON.stringify(OpenApi.fromApi(api as typeof Api), null, 2))
