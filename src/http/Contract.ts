/**
 * The whole contract. Property tests and `bun run openapi --contract` use it; every group is served now (webhook
 * deliveries included), so it is the served Api itself.
 */
import { Api } from "./Api.ts"

export const ContractApi = Api
