/** `/o/{id}/members`: members and their roles (change, remove) and invitations (invite, change, resend, revoke). */
import { useState } from "preact/hooks"
import { del, get, patch, post } from "../api.ts"
import type { MembersW } from "../types.ts"
import { Action, Badge, ErrorBox, Field, Form, Select, Show, useLoad, When } from "../ui.tsx"

const ROLES: ReadonlyArray<readonly [string, string]> = [["member", "member"], ["admin", "admin"]]

export const Members = ({ org }: { readonly org: string }) => {
  const members = useLoad(() => get<MembersW>(`/v1/organizations/${org}/members`), [org])
  const [email, setEmail] = useState("")
  const [role, setRole] = useState("member")
  const path = `/v1/organizations/${org}`
  return (
    <section>
      <h1>Members</h1>
      <Show load={members} what="members">{({ viewer, members: list, invitations }) => (
        <>
          <p class="muted">You are {viewer.role}. Owners and admins manage members; only an owner's role cannot be changed here.</p>
          <table class="table" aria-label="Members">
            <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Since</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>{list.map((m) => (
              <tr key={m.user_id}>
                <td>{m.email}{m.user_id === viewer.user_id && <span class="muted"> (you)</span>}</td>
                <td>{m.role === "owner" || m.user_id === viewer.user_id ? m.role : (
                  <RoleSelect label={`Role of ${m.email}`} value={m.role} save={async (r) => {
                    await patch(`${path}/members/${m.user_id}`, { role: r })
                    members.reload()
                  }} />
                )}</td>
                <td><When at={m.created_at} /></td>
                <td class="actions">{m.user_id !== viewer.user_id && <Action kind="danger" label={`Remove ${m.email}`} run={async () => {
                  await del(`${path}/members/${m.user_id}`)
                  members.reload()
                }}>Remove</Action>}</td>
              </tr>
            ))}</tbody>
          </table>
          <h2>Invitations</h2>
          <Form submit="Invite" label="Invite someone" class="form inline" onSubmit={async () => {
            await post(`${path}/invitations`, { email, role })
            setEmail("")
            members.reload()
          }}>
            <Field label="Email" type="email" value={email} onInput={setEmail} required />
            <Select label="Role" value={role} onChange={setRole} options={ROLES} />
          </Form>
          {invitations.length === 0 ? <p class="muted">No pending invitations.</p> : (
            <table class="table" aria-label="Invitations">
              <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Status</th><th scope="col">Expires</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
              <tbody>{invitations.map((i) => (
                <tr key={i.id}>
                  <td>{i.email}</td>
                  <td>
                    <RoleSelect label={`Role of the invitation to ${i.email}`} value={i.role} save={async (r) => {
                      await patch(`${path}/invitations/${i.id}`, { role: r })
                      members.reload()
                    }} />
                  </td>
                  <td><Badge state={i.status} /></td>
                  <td><When at={i.expires_at} /></td>
                  <td class="actions">
                    <Action label={`Resend the invitation to ${i.email}`} run={async () => {
                      await post(`${path}/invitations/${i.id}/resend`)
                      members.reload()
                    }}>Resend</Action>
                    <Action kind="danger" label={`Revoke the invitation to ${i.email}`} run={async () => {
                      await del(`${path}/invitations/${i.id}`)
                      members.reload()
                    }}>Revoke</Action>
                  </td>
                </tr>
              ))}</tbody>
            </table>
          )}
        </>
      )}</Show>
    </section>
  )
}

/** A role chosen from a list, saved at once; the API's refusal shown beside it. */
const RoleSelect = ({ label, value, save }: { readonly label: string; readonly value: string; readonly save: (role: string) => Promise<unknown> }) => {
  const [error, setError] = useState<unknown>(undefined)
  return (
    <>
      <select aria-label={label} value={value} onChange={(e) => {
        setError(undefined)
        save(e.currentTarget.value).catch(setError)
      }}>{ROLES.map(([v, t]) => <option key={v} value={v}>{t}</option>)}</select>
      <ErrorBox error={error} />
    </>
  )
}
