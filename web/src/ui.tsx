/** Small shared pieces: loading data, showing the API's errors, buttons that run an action, dialogs, badges. */
import type { ComponentChildren } from "preact"
import { useCallback, useEffect, useRef, useState } from "preact/hooks"
import { ApiError } from "./api.ts"

export interface Loaded<T> {
  readonly data: T | undefined
  readonly error: unknown
  readonly loading: boolean
  readonly reload: () => void
  /** Changes the data in place (a live update), from its latest value. */
  readonly update: (change: (current: T | undefined) => T) => void
}

/** Loads `load()` now and whenever `deps` change; `reload` loads again. */
export const useLoad = <T,>(load: () => Promise<T>, deps: ReadonlyArray<unknown>): Loaded<T> => {
  const [data, setData] = useState<T | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [loading, setLoading] = useState(true)
  const [tick, setTick] = useState(0)
  useEffect(() => {
    let live = true
    setLoading(true)
    load().then(
      (value) => {
        if (!live) return
        setData(value)
        setError(undefined)
        setLoading(false)
      },
      (e: unknown) => {
        if (!live) return
        setError(e)
        setLoading(false)
      }
    )
    return () => {
      live = false
    }
  }, [...deps, tick])
  return { data, error, loading, reload: useCallback(() => setTick((t) => t + 1), []), update: setData }
}

/** The API's error as a person reads it: its message, its code, and the request id to quote. */
export const ErrorBox = ({ error }: { readonly error: unknown }) => {
  if (error === undefined || error === null) return null
  if (error instanceof ApiError) {
    return (
      <div class="error" role="alert">
        <strong>{error.message}</strong>
        <span class="code">{error.code}</span>
        {error.requestId !== undefined && <span class="muted"> · request {error.requestId}</span>}
        {error.details !== undefined && <Details details={error.details} />}
      </div>
    )
  }
  return <div class="error" role="alert"><strong>{error instanceof Error ? error.message : String(error)}</strong></div>
}

/** An error's details: the attempts of a placement (why no provider fits), validation issues, or the raw object. */
export const Details = ({ details }: { readonly details: Record<string, unknown> }) => {
  const attempts = details["attempts"]
  if (Array.isArray(attempts)) {
    return (
      <table class="table compact">
        <caption>Why each provider did not take it</caption>
        <thead><tr><th scope="col">Provider</th><th scope="col">Outcome</th><th scope="col">Reason</th></tr></thead>
        <tbody>
          {attempts.map((a: Record<string, unknown>, i) => (
            <tr key={i}><td>{String(a["provider"] ?? "")}</td><td>{String(a["outcome"] ?? "")}</td><td>{String(a["reason"] ?? a["message"] ?? a["code"] ?? "")}</td></tr>
          ))}
        </tbody>
      </table>
    )
  }
  const issues = details["issues"]
  if (Array.isArray(issues)) {
    return <ul class="issues">{issues.map((issue: { path?: string; message?: string }, i) => <li key={i}><code>{issue.path}</code> {issue.message}</li>)}</ul>
  }
  return <pre class="details">{JSON.stringify(details, null, 2)}</pre>
}

/** A button that runs an async action: disabled and labelled busy while it runs; its error shown beside it. */
export const Action = (props: {
  readonly run: () => Promise<unknown>
  readonly children: ComponentChildren
  readonly kind?: "primary" | "danger" | "plain"
  readonly busy?: string
  readonly disabled?: boolean
  readonly label?: string
}) => {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const click = async () => {
    setBusy(true)
    setError(undefined)
    try {
      await props.run()
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  return (
    <span class="action">
      <button type="button" class={props.kind ?? "plain"} disabled={busy || props.disabled === true} aria-busy={busy} aria-label={props.label} onClick={click}>
        {busy ? (props.busy ?? "Working…") : props.children}
      </button>
      <ErrorBox error={error} />
    </span>
  )
}

/** A form whose submit runs an async action, with its error shown under it. */
export const Form = (props: { readonly onSubmit: () => Promise<unknown>; readonly children: ComponentChildren; readonly submit: string; readonly busy?: string; readonly class?: string; readonly label?: string }) => {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const submit = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      await props.onSubmit()
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form class={props.class ?? "form"} onSubmit={submit} aria-label={props.label}>
      {props.children}
      <div class="row">
        <button type="submit" class="primary" disabled={busy} aria-busy={busy}>{busy ? (props.busy ?? "Working…") : props.submit}</button>
      </div>
      <ErrorBox error={error} />
    </form>
  )
}

let fieldIds = 0
/** A labelled input. */
export const Field = (props: {
  readonly label: string
  readonly value: string
  readonly onInput: (value: string) => void
  readonly type?: "text" | "number" | "password" | "email" | "url" | "date"
  readonly required?: boolean
  readonly placeholder?: string
  readonly hint?: string
  readonly pattern?: string
  readonly min?: string
  readonly max?: string
  readonly step?: string
  readonly autoComplete?: string
}) => {
  const id = useRef(`f${++fieldIds}`).current
  return (
    <label class="field" for={id}>
      <span>{props.label}</span>
      <input
        id={id}
        // Preact types each input type apart; the attributes given here suit every type this Field takes.
        type={(props.type ?? "text") as "text"}
        value={props.value}
        required={props.required}
        placeholder={props.placeholder}
        pattern={props.pattern}
        min={props.min}
        max={props.max}
        step={props.step}
        autoComplete={props.autoComplete ?? "off"}
        aria-describedby={props.hint === undefined ? undefined : `${id}-hint`}
        onInput={(e) => props.onInput(e.currentTarget.value)}
      />
      {props.hint !== undefined && <small id={`${id}-hint`} class="muted">{props.hint}</small>}
    </label>
  )
}

/** A labelled select. */
export const Select = (props: { readonly label: string; readonly value: string; readonly onChange: (value: string) => void; readonly options: ReadonlyArray<readonly [string, string]> }) => {
  const id = useRef(`f${++fieldIds}`).current
  return (
    <label class="field" for={id}>
      <span>{props.label}</span>
      <select id={id} value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {props.options.map(([value, text]) => <option key={value} value={value}>{text}</option>)}
      </select>
    </label>
  )
}

export const Check = (props: { readonly label: string; readonly checked: boolean; readonly onChange: (checked: boolean) => void }) => (
  <label class="check">
    <input type="checkbox" checked={props.checked} onChange={(e) => props.onChange(e.currentTarget.checked)} />
    <span>{props.label}</span>
  </label>
)

/** A modal dialog (the browser's own: focus stays inside, Escape closes it). */
export const Dialog = (props: { readonly title: string; readonly open: boolean; readonly onClose: () => void; readonly children: ComponentChildren }) => {
  const ref = useRef<HTMLDialogElement>(null)
  useEffect(() => {
    const dialog = ref.current
    if (dialog === null) return
    if (props.open && !dialog.open) dialog.showModal()
    if (!props.open && dialog.open) dialog.close()
  }, [props.open])
  return (
    <dialog ref={ref} aria-label={props.title} onClose={props.onClose}>
      <h2>{props.title}</h2>
      {props.open && props.children}
      <div class="row end"><button type="button" onClick={props.onClose}>Close</button></div>
    </dialog>
  )
}

/**
 * A destructive action behind a confirmation: the person types `confirmText` (the resource's name, as the API's
 * own confirmations ask) before the button does anything.
 */
export const Confirm = (props: {
  readonly title: string
  readonly confirmText: string
  readonly run: () => Promise<unknown>
  readonly children?: ComponentChildren
  readonly button?: string
}) => {
  const [open, setOpen] = useState(false)
  const [typed, setTyped] = useState("")
  return (
    <>
      <button type="button" class="danger" onClick={() => setOpen(true)}>{props.button ?? props.title}</button>
      <Dialog title={props.title} open={open} onClose={() => setOpen(false)}>
        {props.children}
        <Field label={`Type ${props.confirmText} to confirm`} value={typed} onInput={setTyped} />
        <Action kind="danger" disabled={typed !== props.confirmText} run={async () => {
          await props.run()
          setOpen(false)
        }}>{props.button ?? props.title}</Action>
      </Dialog>
    </>
  )
}

export const CopyButton = ({ text, label }: { readonly text: string; readonly label?: string }) => {
  const [done, setDone] = useState(false)
  return (
    <button type="button" onClick={async () => {
      await navigator.clipboard.writeText(text).catch(() => undefined)
      setDone(true)
      setTimeout(() => setDone(false), 1500)
    }}>{done ? "Copied" : (label ?? "Copy")}</button>
  )
}

const STATE_TONE: Record<string, string> = {
  ready: "ok", succeeded: "ok", active: "ok", delivered: "ok", paid: "ok",
  failed: "bad", cleanup_failed: "bad", timed_out: "bad", revoked: "muted", stopped: "muted", expired: "muted", cancelled: "muted",
  paused: "warn", pausing: "warn", stopping: "warn", retrying: "warn"
}

export const Badge = ({ state }: { readonly state: string }) => <span class={`badge ${STATE_TONE[state] ?? "busy"}`}>{state.replaceAll("_", " ")}</span>

/** A timestamp as the person's local time, with the exact value on hover. */
export const When = ({ at }: { readonly at: string | null | undefined }) =>
  at === null || at === undefined ? <span class="muted">—</span> : <time dateTime={at} title={at}>{new Date(at).toLocaleString()}</time>

export const Loading = ({ what }: { readonly what: string }) => <p class="muted" role="status">Loading {what}…</p>

/** Shows the load's error, or a loading line, or its content. */
export const Show = <T,>({ load, what, children }: { readonly load: Loaded<T>; readonly what: string; readonly children: (data: T) => ComponentChildren }) => {
  if (load.error !== undefined) return <ErrorBox error={load.error} />
  if (load.data === undefined) return <Loading what={what} />
  return <>{children(load.data)}</>
}

export const Tabs = <K extends string,>(props: { readonly tabs: ReadonlyArray<readonly [K, string]>; readonly current: K; readonly onSelect: (tab: K) => void }) => (
  <div class="tabs" role="tablist">
    {props.tabs.map(([key, label]) => (
      <button key={key} type="button" role="tab" aria-selected={props.current === key} class={props.current === key ? "tab current" : "tab"} onClick={() => props.onSelect(key)}>{label}</button>
    ))}
  </div>
)

export const bytes = (n: number | null | undefined) => {
  if (n === null || n === undefined) return "—"
  const units = ["B", "KB", "MB", "GB", "TB"]
  let value = n
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return `${value >= 10 || unit === 0 ? value.toFixed(0) : value.toFixed(1)} ${units[unit]}`
}
