/**
 * `/p/{project}/sandboxes/{id}`: one sandbox — its state (kept live by the project's events), its actions
 * (pause, resume, extend, destroy), the operation under way with its progress, and its tabs: timeline,
 * processes, terminal, files, endpoints, metrics.
 */
import { useLocation } from "preact-iso/router"
import { useState } from "preact/hooks"
import { del, get, post } from "../api.ts"
import { sandboxIdOf, useProjectEvents } from "../events.ts"
import { Endpoints } from "../sandbox/Endpoints.tsx"
import { Files } from "../sandbox/Files.tsx"
import { Metrics } from "../sandbox/Metrics.tsx"
import { OperationProgress } from "../sandbox/OperationProgress.tsx"
import { Processes } from "../sandbox/Processes.tsx"
import { TerminalTab } from "../sandbox/Terminal.tsx"
import { Timeline } from "../sandbox/Timeline.tsx"
import type { CapabilitiesW, EventW, MutationW, SandboxW } from "../types.ts"
import { Action, Badge, Confirm, Field, Show, Tabs, useLoad, When } from "../ui.tsx"
import { sourceOf } from "./NewSandbox.tsx"

type Tab = "timeline" | "processes" | "terminal" | "files" | "endpoints" | "metrics"
const TABS: ReadonlyArray<readonly [Tab, string]> = [["timeline", "Timeline"], ["processes", "Processes"], ["terminal", "Terminal"], ["files", "Files"], ["endpoints", "Endpoints"], ["metrics", "Metrics"]]

export const SandboxPage = ({ project, sandbox: id }: { readonly project: string; readonly sandbox: string }) => {
  const { query } = useLocation()
  const base = `/v1/projects/${project}/sandboxes/${id}`
  const sandbox = useLoad(() => get<SandboxW>(base), [base])
  // What its provider offers (read once it is ready): Pause is offered only where the provider can pause.
  const ready = sandbox.data?.state === "ready"
  const capabilities = useLoad(() => (ready ? get<CapabilitiesW>(`${base}/capabilities`) : Promise.resolve(undefined)), [base, ready])
  // Unknown (the manifest could not be read): offered, and the API says whether it can.
  const canPause = capabilities.data === undefined ? capabilities.error !== undefined : capabilities.data.lifecycle.pause
  const [operation, setOperation] = useState<string | undefined>(query["operation"])
  const [events, setEvents] = useState<ReadonlyArray<EventW>>([])
  const [tab, setTab] = useState<Tab>("timeline")
  const [extendBy, setExtendBy] = useState("3600")
  useProjectEvents(project, (event) => {
    if (sandboxIdOf(event) !== id) return
    setEvents((seen) => [...seen, event])
    if (event.type.startsWith("sandbox.")) sandbox.reload()
  })
  const mutated = (m: MutationW) => {
    sandbox.update(() => m.sandbox)
    setOperation(m.operation.id)
  }
  return (
    <section>
      <p class="crumbs"><a href={`/p/${project}`}>Sandboxes</a> / <code>{id}</code></p>
      <Show load={sandbox} what="the sandbox">{(s) => (
        <>
          <div class="row spread">
            <h1><code>{s.id}</code> <Badge state={s.state} /></h1>
            <div class="row actions">
              {s.state === "ready" && canPause && <Action run={async () => mutated(await post<MutationW>(`${base}/pause`))}>Pause</Action>}
              {s.state === "paused" && <Action run={async () => mutated(await post<MutationW>(`${base}/resume`))}>Resume</Action>}
              {!["stopped", "stopping", "failed"].includes(s.state) && (
                <Confirm title="Destroy this sandbox" button="Destroy" confirmText={s.id} run={async () => mutated(await del<MutationW>(base))}>
                  <p>Its processes end and its files are gone.</p>
                </Confirm>
              )}
            </div>
          </div>
          {s.state_reason !== null && <p class="muted">{s.state_reason}</p>}
          <dl class="facts">
            <div><dt>Provider</dt><dd>{s.provider ?? "choosing…"} <span class="muted">({s.billing_mode})</span></dd></div>
            <div><dt>Source</dt><dd>{sourceOf(s)}</dd></div>
            <div><dt>Resources</dt><dd>{s.resolved_resources === null ? `${s.requested.resources.vcpu} vCPU · ${s.requested.resources.memory_mb} MB (requested)` : `${s.resolved_resources.vcpu} vCPU · ${s.resolved_resources.memory_mb} MB${s.resolved_resources.disk_mb === null ? "" : ` · ${s.resolved_resources.disk_mb} MB disk`}`}</dd></div>
            <div><dt>Created</dt><dd><When at={s.created_at} /></dd></div>
            <div><dt>Ready</dt><dd><When at={s.ready_at} /></dd></div>
            <div><dt>Runs until</dt><dd><When at={s.expires_at} /></dd></div>
            {s.state === "ready" && capabilities.data !== undefined && (
              <div><dt>Pause</dt><dd>{capabilities.data.lifecycle.pause ? "offered" : `not offered by ${capabilities.data.provider}`}</dd></div>
            )}
            <div><dt>Cost</dt><dd>{s.cost_microusd === null ? "—" : `$${(Number(s.cost_microusd) / 1e6).toFixed(4)}`}</dd></div>
            {Object.keys(s.metadata).length > 0 && <div><dt>Metadata</dt><dd>{Object.entries(s.metadata).map(([k, v]) => `${k}=${v}`).join(" · ")}</dd></div>}
          </dl>
          {s.state === "ready" && (
            <div class="row">
              <Field label="Extend the runtime to (seconds from now)" type="number" min="1" max="172800" value={extendBy} onInput={setExtendBy} />
              <Action run={async () => {
                const extended = await post<SandboxW>(`${base}/extend`, { runtime_timeout_seconds: Number(extendBy) })
                sandbox.update(() => extended)
              }}>Extend</Action>
            </div>
          )}
          {operation !== undefined && <OperationProgress project={project} operation={operation} onDone={sandbox.reload} />}
          <Tabs tabs={TABS} current={tab} onSelect={setTab} />
          <div role="tabpanel" class="panel">
            {tab === "timeline" && <Timeline project={project} sandbox={s} live={events} />}
            {tab === "processes" && <Processes base={base} sandbox={s} />}
            {tab === "terminal" && <TerminalTab base={base} sandbox={s} />}
            {tab === "files" && <Files base={base} sandbox={s} />}
            {tab === "endpoints" && <Endpoints base={base} sandbox={s} live={events} />}
            {tab === "metrics" && <Metrics base={base} sandbox={s} />}
          </div>
        </>
      )}</Show>
    </section>
  )
}
