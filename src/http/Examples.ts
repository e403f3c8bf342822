/**
 * One request body per operation that takes one, as the OpenAPI document shows it (and `/docs`'s "Try it out"
 * sends it): each succeeds as it is, on a gateway with no provider credentials, given the path's resources —
 * test/http/openapi-examples.test.ts sends every one to a real server and expects the documented status. The
 * values are the wire's (what a client sends), so they are plain JSON, not the Schemas' decoded types. The project
 * path's routes (the dashboard's) take the same bodies as the key routes they mirror. Signing in is the one body
 * that carries a credential: its example shows the shape, and the test sends a token of its own in it.
 */
type Json = string | number | boolean | null | ReadonlyArray<Json> | { readonly [key: string]: Json }

const KEY_ROUTE_EXAMPLES = {
  "organizations.create": { name: "Acme Research", slug: "acme-research" },
  "organizations.update": { name: "Acme Labs", slug: "acme-labs" },
  "organizations.delete": { confirm_name: "Acme Research", confirm_forfeit_balance: false },
  "members.invite": { email: "teammate@example.com", role: "member" },
  "members.updateInvitation": { role: "admin" },
  "members.update": { role: "admin" },
  "projects.create": { name: "Web", slug: "web" },
  "projects.update": { name: "Web app", slug: "web-app" },
  "apiKeys.create": { name: "ci", expires_in: "90d" },
  "billing.autoTopup": { enabled: false, threshold_usd: "10", refill_usd: "50", monthly_cap_usd: "200" },
  "webhooks.create": {
    name: "ops",
    url: "https://hooks.example.com/metal",
    event_types: ["sandbox.ready", "sandbox.failed", "process.completed", "process.failed"]
  },
  "webhooks.update": { enabled: true },
  "providerCredentials.put": { provider: "e2b", api_key: "e2b_0123456789abcdef" },
  "sandboxes.create": {
    source: { kind: "environment", environment: "metal/python" },
    resources: { vcpu: 1, memory_mb: 1024 },
    lifecycle: { runtime_timeout_seconds: 3600, idle_timeout_seconds: 600, on_idle_timeout: "pause" },
    metadata: { task: "t-42" },
    // The port the endpoint example exposes: placed where endpoints can be served.
    features: { public_ports: [8000] }
  },
  "sandboxes.extend": { runtime_timeout_seconds: 7200 },
  "processes.start": { command: ["python3", "-c", "print(6 * 7)"], timeout_seconds: 60 },
  "processes.stdin": { data_base64: "MQoyCg==", eof: true },
  "filesystem.read": { path: "/workspace/hello.txt" },
  "filesystem.write": { path: "/workspace/hello.txt", data_base64: "aGVsbG8K", mode: "overwrite", create_parents: true },
  "filesystem.list": { path: "/workspace", recursive: false },
  "filesystem.delete": { path: "/workspace/hello.txt" },
  "filesystem.writeContent": "hello\n",
  "endpoints.create": { port: 8000, lease_seconds: 600 },
  // On a sandbox created with features.computer_use: true.
  "computer.action": { type: "mouse_click", x: 640, y: 400, button: "left", double: false },
  "computer.screenshot": { format: "png", show_cursor: true },
  "computer.startRecording": { format: "mp4", label: "checkout flow" }
} satisfies Record<string, Json>

/** The project path's routes and the key routes whose bodies they take. */
const PROJECT_PATH_MIRRORS: Readonly<Record<string, keyof typeof KEY_ROUTE_EXAMPLES>> = {
  "projectSandboxes.create": "sandboxes.create",
  "projectSandboxes.extend": "sandboxes.extend",
  "projectProcesses.start": "processes.start",
  "projectProcesses.stdin": "processes.stdin",
  "projectFilesystem.read": "filesystem.read",
  "projectFilesystem.write": "filesystem.write",
  "projectFilesystem.list": "filesystem.list",
  "projectFilesystem.delete": "filesystem.delete",
  "projectFilesystem.writeContent": "filesystem.writeContent",
  "projectEndpoints.create": "endpoints.create"
}

export const REQUEST_EXAMPLES: Readonly<Record<string, Json>> = {
  ...KEY_ROUTE_EXAMPLES,
  ...Object.fromEntries(Object.entries(PROJECT_PATH_MIRRORS).map(([id, mirrored]) => [id, KEY_ROUTE_EXAMPLES[mirrored]])),
  "sessions.signIn": { user_token: "metal_ut_3q2-7wEXAMPLEonlyXk9F0aPqLmZ1vN8rT5sYbC4dG6hJ" }
}
