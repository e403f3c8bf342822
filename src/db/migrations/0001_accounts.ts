/**
 * The account plane: users and their tokens, organizations, members, invitations, projects, API keys,
 * idempotency records, billing, usage records, webhooks, provider credentials and the durable event log.
 * Timestamps are ISO 8601 UTC strings (lexicographic order = time order); money is integer micro-USD.
 */
import { Effect } from "effect"
import { ddl } from "./Ddl.ts"

export default Effect.gen(function*() {
  const statements = [
    `CREATE TABLE users (
      id TEXT PRIMARY KEY,
      email TEXT NOT NULL UNIQUE,
      created_at TEXT NOT NULL
    )`,
    `CREATE TABLE user_tokens (
      id TEXT PRIMARY KEY,
      user_id TEXT NOT NULL REFERENCES users(id),
      name TEXT NOT NULL,
      prefix TEXT NOT NULL,
      token_hash TEXT NOT NULL UNIQUE,
      created_at TEXT NOT NULL,
      expires_at TEXT,
      revoked_at TEXT,
      last_used_at TEXT
    )`,
    `CREATE INDEX user_tokens_user ON user_tokens(user_id)`,
    `CREATE TABLE organizations (
      id TEXT PRIMARY KEY,
      name TEXT NOT NULL,
      slug TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      deleted_at TEXT
    )`,
    `CREATE UNIQUE INDEX organizations_slug ON organizations(slug) WHERE deleted_at IS NULL`,
    `CREATE TABLE memberships (
      organization_id TEXT NOT NULL REFERENCES organizations(id),
      user_id TEXT NOT NULL REFERENCES users(id),
      role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
      created_at TEXT NOT NULL,
      PRIMARY KEY (organization_id, user_id)
    )`,
    `CREATE INDEX memberships_user ON memberships(user_id)`,
    `CREATE TABLE invitations (
      id TEXT PRIMARY KEY,
      organization_id TEXT NOT NULL REFERENCES organizations(id),
      email TEXT NOT NULL,
      role TEXT NOT NULL CHECK (role IN ('admin', 'member')),
      invited_by TEXT NOT NULL REFERENCES users(id),
      created_at TEXT NOT NULL,
      expires_at TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'revoked')),
      accepted_at TEXT,
      revoked_at TEXT
    )`,
    `CREATE INDEX invitations_email ON invitations(email, status)`,
    `CREATE UNIQUE INDEX invitations_pending ON invitations(organization_id, email) WHERE status = 'pending'`,
    `CREATE TABLE projects (
      id TEXT PRIMARY KEY,
      organization_id TEXT NOT NULL REFERENCES organizations(id),
      name TEXT NOT NULL,
      slug TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      deleted_at TEXT
    )`,
    `CREATE UNIQUE INDEX projects_slug ON projects(organization_id, slug) WHERE deleted_at IS NULL`,
    `CREATE TABLE api_keys (
      id TEXT PRIMARY KEY,
      project_id TEXT NOT NULL REFERENCES projects(id),
      name TEXT NOT NULL,
      prefix TEXT NOT NULL,
      key_hash TEXT NOT NULL UNIQUE,
      created_by TEXT REFERENCES users(id),
      created_at TEXT NOT NULL,
      last_used_at TEXT,
      expires_at TEXT,
      revoked_at TEXT,
      deleted_at TEXT
    )`,
    `CREATE INDEX api_keys_project ON api_keys(project_id)`,
    `CREATE TABLE idempotency_keys (
      principal_id TEXT NOT NULL,
      scope TEXT NOT NULL,
      key_hash TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      response_status INTEGER,
      response_body TEXT,
      created_at TEXT NOT NULL,
      expires_at TEXT NOT NULL,
      PRIMARY KEY (principal_id, scope, key_hash)
    )`,
    `CREATE TABLE billing_accounts (
      organization_id TEXT PRIMARY KEY REFERENCES organizations(id),
      balance_microusd INTEGER NOT NULL DEFAULT 0,
      payment_method_brand TEXT,
      payment_method_last4 TEXT,
      auto_topup_enabled INTEGER NOT NULL DEFAULT 0,
      auto_topup_status TEXT NOT NULL DEFAULT 'disabled',
      auto_topup_threshold_microusd INTEGER NOT NULL DEFAULT 10000000,
      auto_topup_refill_microusd INTEGER NOT NULL DEFAULT 50000000,
      auto_topup_monthly_cap_microusd INTEGER NOT NULL DEFAULT 500000000,
      auto_topup_paused_reason TEXT,
      updated_at TEXT NOT NULL
    )`,
    `CREATE TABLE ledger_entries (
      id TEXT PRIMARY KEY,
      organization_id TEXT NOT NULL REFERENCES organizations(id),
      kind TEXT NOT NULL CHECK (kind IN ('deposit', 'usage_charge', 'usage_correction', 'adjustment')),
      amount_microusd INTEGER NOT NULL,
      balance_after_microusd INTEGER NOT NULL,
      description TEXT NOT NULL,
      reference_type TEXT,
      reference_id TEXT,
      created_at TEXT NOT NULL
    )`,
    `CREATE INDEX ledger_entries_org ON ledger_entries(organization_id, created_at)`,
    `CREATE UNIQUE INDEX ledger_entries_reference ON ledger_entries(reference_type, reference_id) WHERE reference_id IS NOT NULL`,
    `CREATE TABLE purchases (
      id TEXT PRIMARY KEY,
      organization_id TEXT NOT NULL REFERENCES organizations(id),
      source TEXT NOT NULL CHECK (source IN ('checkout', 'auto_topup', 'admin_grant', 'welcome_grant')),
      status TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'failed', 'canceled', 'requires_action')),
      credit_microusd INTEGER NOT NULL,
      fee_microusd INTEGER NOT NULL,
      total_microusd INTEGER NOT NULL,
      receipt_url TEXT,
      invoice_url TEXT,
      created_at TEXT NOT NULL,
      paid_at TEXT
    )`,
    `CREATE INDEX purchases_org ON purchases(organization_id, created_at)`,
    `CREATE TABLE welcome_credit_grants (
      user_id TEXT PRIMARY KEY REFERENCES users(id),
      organization_id TEXT NOT NULL REFERENCES organizations(id),
      granted_at TEXT NOT NULL
    )`,
    `CREATE TABLE usage_records (
      id TEXT PRIMARY KEY,
      organization_id TEXT NOT NULL REFERENCES organizations(id),
      project_id TEXT NOT NULL,
      sandbox_id TEXT NOT NULL,
      provider TEXT NOT NULL,
      billing_mode TEXT NOT NULL,
      cost_delta_microusd INTEGER NOT NULL,
      cumulative_microusd INTEGER NOT NULL,
      provenance TEXT NOT NULL,
      confidence TEXT NOT NULL,
      rate_card_version TEXT,
      measured_through TEXT NOT NULL,
      created_at TEXT NOT NULL
    )`,
    `CREATE INDEX usage_records_org ON usage_records(organization_id, created_at)`,
    `CREATE INDEX usage_records_sandbox ON usage_records(sandbox_id, measured_through)`,
    `CREATE TABLE webhooks (
      id TEXT PRIMARY KEY,
      organization_id TEXT NOT NULL REFERENCES organizations(id),
      name TEXT NOT NULL,
      url TEXT NOT NULL,
      event_types TEXT NOT NULL,
      enabled INTEGER NOT NULL,
      secret_ciphertext TEXT NOT NULL,
      secret_prefix TEXT NOT NULL,
      rotated_at TEXT,
      last_delivery_at TEXT,
      last_delivery_status TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      disabled_at TEXT,
      deleted_at TEXT
    )`,
    `CREATE INDEX webhooks_org ON webhooks(organization_id)`,
    `CREATE TABLE provider_credentials (
      id TEXT PRIMARY KEY,
      organization_id TEXT NOT NULL REFERENCES organizations(id),
      provider TEXT NOT NULL,
      ciphertext TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      deleted_at TEXT
    )`,
    `CREATE UNIQUE INDEX provider_credentials_live ON provider_credentials(organization_id, provider) WHERE deleted_at IS NULL`,
    `CREATE TABLE domain_events (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      id TEXT NOT NULL UNIQUE,
      type TEXT NOT NULL,
      organization_id TEXT NOT NULL,
      project_id TEXT,
      occurred_at TEXT NOT NULL,
      data TEXT NOT NULL
    )`,
    `CREATE INDEX domain_events_org ON domain_events(organization_id, seq)`,
    `CREATE INDEX domain_events_project ON domain_events(project_id, seq)`
  ]
  yield* ddl(statements)
})
