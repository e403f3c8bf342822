/**
 * The sandbox's files: a directory's entries (a list operation, polled until it ends), open a file (its bytes as
 * text, up to OPEN_LIMIT), download it (the raw route, straight to disk), upload into the directory (a raw write,
 * with the bytes sent shown as they go), delete.
 */
import { useState } from "preact/hooks"
import { ApiError, envelopeOf, newKey, post, settle, upload } from "../api.ts"
import type { RuntimeOperationW, SandboxW } from "../types.ts"
import { Action, bytes, ErrorBox, Field, Form, Show, useLoad, When } from "../ui.tsx"

const OPEN_LIMIT = 1024 * 1024

interface Entry {
  readonly path: string
  readonly type: "file" | "directory" | "symlink" | "other"
  readonly size_bytes: number
  readonly modified_at: string
}

const parentOf = (dir: string) => (dir === "/" ? "/" : dir.replace(/\/[^/]+\/?$/, "") || "/")
const join = (dir: string, name: string) => `${dir.replace(/\/$/, "")}/${name}`
const nameOf = (path: string) => path.slice(path.lastIndexOf("/") + 1)

/** A file operation run to its end: its result, or its error thrown as the API's. */
const runOperation = async (base: string, route: string, body: unknown, idempotencyKey?: string) => {
  const accepted = await post<RuntimeOperationW>(`${base}/filesystem/${route}`, body, idempotencyKey === undefined ? {} : { idempotencyKey })
  const done = await settle(`${base}/runtime-operations/${accepted.id}`, accepted)
  if (done.error !== null) throw new ApiError(0, done.error.code, done.error.message, undefined, done.error.details as Record<string, unknown> | undefined)
  return done
}

export const Files = ({ base, sandbox }: { readonly base: string; readonly sandbox: SandboxW }) => {
  const [dir, setDir] = useState("/workspace")
  const [typed, setTyped] = useState("/workspace")
  const [opened, setOpened] = useState<{ path: string; text: string } | undefined>(undefined)
  const [progress, setProgress] = useState<{ name: string; sent: number; total: number } | undefined>(undefined)
  const [uploadError, setUploadError] = useState<unknown>(undefined)
  const listing = useLoad(async () => {
    const done = await runOperation(base, "list", { path: dir })
    const result = done.result as { entries: ReadonlyArray<Entry>; truncated: boolean } | null
    return { entries: [...(result?.entries ?? [])].sort((a, b) => (a.type === b.type ? a.path.localeCompare(b.path) : a.type === "directory" ? -1 : 1)), truncated: result?.truncated ?? false }
  }, [base, dir])
  const go = (path: string) => {
    setDir(path)
    setTyped(path)
    setOpened(undefined)
  }
  const raw = (path: string) => `${base}/files/content?path=${encodeURIComponent(path)}`
  if (sandbox.state !== "ready") return <p class="muted">Files can be read once the sandbox is ready.</p>
  return (
    <div>
      <Form submit="Open" label="Go to a directory" class="form inline" onSubmit={async () => go(typed)}>
        <Field label="Directory" value={typed} onInput={setTyped} required />
      </Form>
      <div class="row">
        <label class="button">
          Upload a file
          <input type="file" class="visually-hidden" aria-label="Upload a file" onChange={async (e) => {
            const file = e.currentTarget.files?.[0]
            e.currentTarget.value = ""
            if (file === undefined) return
            setUploadError(undefined)
            setProgress({ name: file.name, sent: 0, total: file.size })
            try {
              await upload(raw(join(dir, file.name)), file, (sent, total) => setProgress({ name: file.name, sent, total }))
              listing.reload()
            } catch (error) {
              setUploadError(error)
            } finally {
              setProgress(undefined)
            }
          }} />
        </label>
        {progress !== undefined && (
          <span role="status" class="upload">
            Uploading {progress.name}: {bytes(progress.sent)} of {bytes(progress.total)}
            <progress max={progress.total} value={progress.sent} aria-label={`Upload of ${progress.name}`} />
          </span>
        )}
      </div>
      <ErrorBox error={uploadError} />
      <Show load={listing} what={dir}>{({ entries, truncated }) => (
        <table class="table compact" aria-label={`Files in ${dir}`}>
          <thead><tr><th scope="col">Name</th><th scope="col">Size</th><th scope="col">Modified</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
          <tbody>
            {dir !== "/" && <tr><td colSpan={4}><button type="button" class="link" onClick={() => go(parentOf(dir))}>..</button></td></tr>}
            {entries.map((entry) => (
              <tr key={entry.path} data-path={entry.path}>
                <td>{entry.type === "directory"
                  ? <button type="button" class="link" onClick={() => go(entry.path)}>{nameOf(entry.path)}/</button>
                  : <button type="button" class="link" onClick={() => {
                    setUploadError(undefined)
                    fetch(raw(entry.path), { headers: { range: `bytes=0-${OPEN_LIMIT - 1}` } })
                      .then(async (r) => (r.ok ? setOpened({ path: entry.path, text: await r.text() }) : setUploadError(envelopeOf(r.status, await r.text(), r.headers.get("x-request-id")))))
                      .catch(setUploadError)
                  }}>{nameOf(entry.path)}</button>}
                </td>
                <td>{entry.type === "directory" ? "—" : bytes(entry.size_bytes)}</td>
                <td><When at={entry.modified_at} /></td>
                <td class="actions">
                  {entry.type === "file" && <a class="button" href={raw(entry.path)} download={nameOf(entry.path)}>Download</a>}
                  <Action kind="danger" label={`Delete ${nameOf(entry.path)}`} run={async () => {
                    await runOperation(base, "delete", { path: entry.path, recursive: entry.type === "directory" }, newKey())
                    listing.reload()
                  }}>Delete</Action>
                </td>
              </tr>
            ))}
          </tbody>
          {truncated && <caption>Only the first entries are shown.</caption>}
        </table>
      )}</Show>
      {opened !== undefined && (
        <section class="card">
          <h3>{opened.path}</h3>
          <pre class="console">{opened.text}</pre>
        </section>
      )}
    </div>
  )
}
