/**
 * Account-plane resources and requests (spec §2.10–2.13, §4.2–4.3, §8; reference §2 and §6). Request bodies
 * reject unknown keys, so a typo is a 422 rather than silently ignored.
 */
import { Schema } from "effect"
import { OrganizationId, ProjectId, UserId, Uuid } from "./Ids.ts"

export const strict = { parseOptions: { onExcessProperty: "error", errors: "all" } } as const

export const Timestamp = Schema.String.annotations({ identifier: "Timestamp", description: "ISO 8601 date-time, UTC", format: "date-time" })
export const NullableTimestamp = Schema.NullOr(Timestamp)

/** 1–120 characters, not blank; surrounding white space is trimmed where the name is stored. */
export const Name = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(120),
  Schema.filter((s) => s.trim().length > 0 || "must not be blank")
).annotations({ identifier: "Name" })
export const Slug = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(63),
  Schema.pattern(/^[a-z0-9]+(?:-[a-z0-9]+)*$/, { message: () => "must be lowercase letters and digits separated by single hyphens" })
).annotations({ identifier: "Slug" })

export const Role = Schema.Literal("owner", "admin", "member").annotations({ identifier: "Role" })
export const InvitableRole = Schema.Literal("admin", "member")

/** Trimmed and lower-cased on the way in; at most 320 characters. */
export const Email = Schema.Trim.pipe(
  Schema.compose(Schema.Lowercase),
  Schema.maxLength(320),
  Schema.pattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/, { message: () => "must be an email address" })
).annotations({ identifier: "Email" })

// Organizations ---------------------------------------------------------------------------------------------

export const Organization = Schema.Struct({
  id: OrganizationId,
  name: Schema.String,
  slug: Schema.String,
  created_at: Timestamp,
  updated_at: Timestamp
}).annotations({ identifier: "Organization" })

export const OrganizationList = Schema.Struct({ organizations: Schema.Array(Organization) }).annotations({ identifier: "OrganizationList" })

export const CreateOrganization = Schema.Struct({ name: Name, slug: Slug }).annotations({ identifier: "CreateOrganization", ...strict })
export const UpdateOrganization = Schema.Struct({ name: Name, slug: Slug }).annotations({ identifier: "UpdateOrganization", ...strict })
export const DeleteOrganization = Schema.Struct({
  confirm_name: Schema.String.pipe(Schema.maxLength(120)),
  confirm_forfeit_balance: Schema.optionalWith(Schema.Boolean, { default: () => false })
}).annotations({ identifier: "DeleteOrganization", ...strict })

export const Deleted = Schema.Struct({ id: Schema.String, deleted: Schema.Literal(true) }).annotations({ identifier: "Deleted" })

// Members and invitations -------------------------------------------------------------------------------------

export const Member = Schema.Struct({
  user_id: UserId,
  email: Schema.String,
  role: Role,
  created_at: Timestamp
}).annotations({ identifier: "Member" })

/** Invitations expire 7 days after they were sent (or last resent). */
export const INVITATION_TTL_SECONDS = 7 * 86_400

export const InvitationStatus = Schema.Literal("pending", "expired")
export const Invitation = Schema.Struct({
  id: Uuid,
  organization_id: OrganizationId,
  email: Schema.String,
  role: InvitableRole,
  invited_by: UserId,
  created_at: Timestamp,
  expires_at: Timestamp,
  status: InvitationStatus
}).annotations({ identifier: "Invitation" })

/** The caller's own membership, so a client knows what it may do. */
export const Viewer = Schema.Struct({ user_id: UserId, role: Role }).annotations({ identifier: "Viewer" })

export const MembersList = Schema.Struct({
  viewer: Viewer,
  members: Schema.Array(Member),
  invitations: Schema.Array(Invitation)
}).annotations({ identifier: "MembersList" })

export const UpdateMember = Schema.Struct({ role: InvitableRole }).annotations({ identifier: "UpdateMember", ...strict })
export const MemberRemoved = Schema.Struct({ user_id: UserId, deleted: Schema.Literal(true) }).annotations({ identifier: "MemberRemoved" })

export const CreateInvitation = Schema.Struct({
  email: Email,
  role: Schema.optionalWith(InvitableRole, { default: () => "member" as const })
}).annotations({ identifier: "CreateInvitation", ...strict })
export const UpdateInvitation = Schema.Struct({ role: InvitableRole }).annotations({ identifier: "UpdateInvitation", ...strict })
export const InvitationRevoked = Schema.Struct({ id: Uuid, revoked: Schema.Literal(true) }).annotations({ identifier: "InvitationRevoked" })

// Projects and API keys -----------------------------------------------------------------------------------

export const Project = Schema.Struct({
  id: ProjectId,
  organization_id: OrganizationId,
  name: Schema.String,
  slug: Schema.String,
  created_at: Timestamp,
  updated_at: Timestamp
}).annotations({ identifier: "Project" })

export const ProjectList = Schema.Struct({ projects: Schema.Array(Project) }).annotations({ identifier: "ProjectList" })
export const CreateProject = Schema.Struct({ name: Name, slug: Slug }).annotations({ identifier: "CreateProject", ...strict })
export const UpdateProject = Schema.Struct({ name: Name, slug: Slug }).annotations({ identifier: "UpdateProject", ...strict })

export const ExpiresIn = Schema.Literal("1h", "1d", "7d", "30d", "90d", "180d", "1y")
export const EXPIRES_IN_SECONDS: Record<typeof ExpiresIn.Type, number> = {
  "1h": 3600,
  "1d": 86_400,
  "7d": 7 * 86_400,
  "30d": 30 * 86_400,
  "90d": 90 * 86_400,
  "180d": 180 * 86_400,
  "1y": 365 * 86_400
}

export const ProjectApiKey = Schema.Struct({
  id: Uuid,
  project_id: ProjectId,
  name: Schema.String,
  prefix: Schema.String,
  created_at: Timestamp,
  last_used_at: NullableTimestamp,
  expires_at: NullableTimestamp,
  revoked_at: NullableTimestamp,
  deleted_at: NullableTimestamp
}).annotations({ identifier: "ProjectApiKey" })

export const ApiKeyList = Schema.Struct({ api_keys: Schema.Array(ProjectApiKey) }).annotations({ identifier: "ApiKeyList" })
export const CreateApiKey = Schema.Struct({
  name: Name,
  expires_in: Schema.optionalWith(Schema.NullOr(ExpiresIn), { default: () => null })
}).annotations({ identifier: "CreateApiKey", ...strict })
export const CreatedApiKey = Schema.Struct({
  api_key: ProjectApiKey,
  key: Schema.String.annotations({ description: "The full key; shown only in this response" })
}).annotations({ identifier: "CreatedApiKey" })

// Events ----------------------------------------------------------------------------------------------------

export const DurableEvent = Schema.Struct({
  cursor: Schema.String,
  event_id: Uuid,
  type: Schema.String,
  organization_id: OrganizationId,
  project_id: Schema.NullOr(ProjectId),
  occurred_at: Timestamp,
  data: Schema.Record({ key: Schema.String, value: Schema.Unknown })
}).annotations({ identifier: "DurableEvent" })

export const EventList = Schema.Struct({
  events: Schema.Array(DurableEvent),
  next_cursor: Schema.NullOr(Schema.String)
}).annotations({ identifier: "EventList" })
