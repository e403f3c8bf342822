/** The sandbox's history: the project's events about it (the durable log), then each new one as it happens. */
import { get } from "../api.ts"
import { sandboxIdOf } from "../events.ts"
import type { EventW, SandboxW } from "../types.ts"
import { Show, useLoad, When } from "../ui.tsx"

/** At most this many pages of the project's log are read for one sandbox's history. */
const MAX_PAGES = 10

const loadHistory = async (project: string, sandboxId: string) => {
  const found: Array<EventW> = []
  let after: string | null = null
  for (let page = 0; page < MAX_PAGES; page++) {
    const query: string = `/v1/events?project_id=${project}&limit=100${after === null ? "" : `&after=${encodeURIComponent(after)}`}`
    const { events, next_cursor } = await get<{ events: ReadonlyArray<EventW>; next_cursor: string | null }>(query)
    found.push(...events.filter((e) => sandboxIdOf(e) === sandboxId))
    if (next_cursor === null) break
    after = next_cursor
  }
  return found
}

const summary = (event: EventW) => {
  const d = event.data
  const parts = ["provider", "state", "exit_code", "port", "path", "reason", "code"].filter((k) => d[k] !== undefined && d[k] !== null).map((k) => `${k}: ${String(d[k])}`)
  const error = d["error"] as { message?: string } | null | undefined
  if (error?.message !== undefined) parts.push(error.message)
  return parts.join(" · ")
}

export const Timeline = ({ project, sandbox, live }: { readonly project: string; readonly sandbox: SandboxW; readonly live: ReadonlyArray<EventW> }) => {
  const history = useLoad(() => loadHistory(project, sandbox.id), [project, sandbox.id])
  return (
    <Show load={history} what="the timeline">{(past) => {
      const seen = new Set(past.map((e) => e.event_id))
      const all = [...past, ...live.filter((e) => !seen.has(e.event_id))]
      return (
        <ol class="timeline" aria-label="Timeline">
          {all.map((e) => (
            <li key={e.event_id}><When at={e.occurred_at} /> <strong>{e.type}</strong> <span class="muted">{summary(e)}</span></li>
          ))}
        </ol>
      )
    }}</Show>
  )
}
