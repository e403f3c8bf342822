/**
 * `/p/{id}/new`: a sandbox request (source: environment, image or provider template; resources; lifecycle;
 * network; provider or auto; metadata). Sent once with an Idempotency-Key (a retry of the same form reuses it), then
 * the sandbox's page follows its operation; when no provider fits, that page shows why each one did not.
 */
import { useLocation } from "preact-iso/router"
import { useState } from "preact/hooks"
import { newKey, post } from "../api.ts"
import type { MutationW, SandboxRequestW, SandboxW } from "../types.ts"
import { Check, Field, Form, Select } from "../ui.tsx"
import { catalog, ENVIRONMENT_NAMES, PROVIDERS, type ProviderName, versionsOf } from "../catalog.ts"

export const sourceOf = (s: SandboxW) => {
  const source = s.requested.source
  return source.kind === "environment" ? `${source.environment}:${source.version ?? "latest"}` : source.kind === "oci_image" ? source.image : `${source.provider} ${source.template}`
}

type SourceKind = "environment" | "oci_image" | "provider_template"

const lines = (text: string) => text.split(/[\n,]/).map((s) => s.trim()).filter((s) => s !== "")

export const NewSandbox = ({ project }: { readonly project: string }) => {
  const { route } = useLocation()
  const [kind, setKind] = useState<SourceKind>("environment")
  const [environment, setEnvironment] = useState("metal/base")
  const [version, setVersion] = useState("latest")
  const [image, setImage] = useState("")
  const [command, setCommand] = useState("")
  const [templateProvider, setTemplateProvider] = useState<string>("e2b")
  const [template, setTemplate] = useState("")
  const [vcpu, setVcpu] = useState("1")
  const [memory, setMemory] = useState("512")
  const [disk, setDisk] = useState("")
  const [architecture, setArchitecture] = useState("any")
  const [runtime, setRuntime] = useState("3600")
  const [idle, setIdle] = useState("")
  const [onRuntime, setOnRuntime] = useState("destroy")
  const [onIdle, setOnIdle] = useState("destroy")
  const [internet, setInternet] = useState("default")
  const [allow, setAllow] = useState("")
  const [deny, setDeny] = useState("")
  const [provider, setProvider] = useState("auto")
  const [pty, setPty] = useState(true)
  const [ports, setPorts] = useState("")
  const [metadata, setMetadata] = useState("")
  // One key per request the person makes: resubmitting after a failed attempt with the same form replays safely.
  const [key] = useState(newKey)

  const request = (): SandboxRequestW => {
    const source: SandboxRequestW["source"] = kind === "environment"
      ? { kind, environment, version }
      : kind === "oci_image"
      ? { kind, image, ...(command.trim() === "" ? {} : { command: command.trim().split(/\s+/) }) }
      : { kind, provider: templateProvider as ProviderName, template }
    const network = internet === "default" && allow === "" && deny === ""
      ? undefined
      : {
        ...(internet === "default" ? {} : { internet_access: internet === "on" }),
        ...(allow === "" ? {} : { allow_domains: lines(allow) }),
        ...(deny === "" ? {} : { deny_domains: lines(deny) })
      }
    const publicPorts = lines(ports).map(Number)
    const features = { ...(pty ? { pty: true } : {}), ...(publicPorts.length === 0 ? {} : { public_ports: publicPorts }) }
    const meta = Object.fromEntries(lines(metadata).map((pair) => {
      const at = pair.indexOf("=")
      return at < 0 ? [pair, ""] : [pair.slice(0, at), pair.slice(at + 1)]
    }))
    return {
      source,
      resources: { vcpu: Number(vcpu), memory_mb: Number(memory), architecture: architecture as "any", ...(disk === "" ? {} : { disk_mb: Number(disk) }) },
      lifecycle: {
        runtime_timeout_seconds: Number(runtime),
        on_runtime_timeout: onRuntime as "destroy",
        on_idle_timeout: onIdle as "destroy",
        ...(idle === "" ? {} : { idle_timeout_seconds: Number(idle) })
      },
      ...(provider === "auto" ? {} : { provider: provider as ProviderName }),
      ...(Object.keys(features).length === 0 ? {} : { features }),
      ...(network === undefined ? {} : { network }),
      ...(Object.keys(meta).length === 0 ? {} : { metadata: meta })
    }
  }

  return (
    <section>
      <h1>New sandbox</h1>
      <Form submit="Create sandbox" busy="Creating…" label="New sandbox" onSubmit={async () => {
        const created = await post<MutationW>(`/v1/projects/${project}/sandboxes`, request(), { idempotencyKey: key })
        route(`/p/${project}/sandboxes/${created.sandbox.id}?operation=${created.operation.id}`)
      }}>
        <fieldset>
          <legend>Source</legend>
          <Select label="Kind" value={kind} onChange={(v) => setKind(v as SourceKind)} options={[["environment", "Environment"], ["oci_image", "OCI image"], ["provider_template", "Provider template"]]} />
          {kind === "environment" && (
            <>
              <Select label="Environment" value={environment} onChange={(name) => {
                setEnvironment(name)
                setVersion(versionsOf(name)[0] ?? "latest")
              }} options={ENVIRONMENT_NAMES.map((name) => [name, `${name}: ${catalog.environments.find((e) => e.name === name)?.description ?? ""}`] as const)} />
              <Select label="Version" value={version} onChange={setVersion} options={versionsOf(environment).map((v) => [v, v] as const)} />
            </>
          )}
          {kind === "oci_image" && (
            <>
              <Field label="Image" value={image} onInput={setImage} required placeholder="registry.example.com/team/app:1.2" hint="Pulled by the gateway; the pull's progress shows on the sandbox's page." />
              <Field label="Command (optional)" value={command} onInput={setCommand} placeholder="sleep infinity" />
            </>
          )}
          {kind === "provider_template" && (
            <>
              <Select label="Template's provider" value={templateProvider} onChange={setTemplateProvider} options={PROVIDERS.map((p) => [p, p] as const)} />
              <Field label="Template" value={template} onInput={setTemplate} required />
            </>
          )}
        </fieldset>
        <fieldset>
          <legend>Resources</legend>
          <Field label="vCPU" type="number" min="0.25" step="0.25" value={vcpu} onInput={setVcpu} required />
          <Field label="Memory (MB)" type="number" min="128" value={memory} onInput={setMemory} required />
          <Field label="Disk (MB, optional)" type="number" min="0" value={disk} onInput={setDisk} />
          <Select label="Architecture" value={architecture} onChange={setArchitecture} options={[["any", "any"], ["x86_64", "x86_64"], ["arm64", "arm64"]]} />
        </fieldset>
        <fieldset>
          <legend>Lifecycle</legend>
          <Field label="Runtime timeout (s)" type="number" min="1" max="172800" value={runtime} onInput={setRuntime} required />
          <Select label="When it runs out" value={onRuntime} onChange={setOnRuntime} options={[["destroy", "destroy"], ["pause", "pause"]]} />
          <Field label="Idle timeout (s, optional)" type="number" min="1" value={idle} onInput={setIdle} />
          <Select label="When idle" value={onIdle} onChange={setOnIdle} options={[["destroy", "destroy"], ["pause", "pause"]]} />
        </fieldset>
        <fieldset>
          <legend>Network</legend>
          <Select label="Internet access" value={internet} onChange={setInternet} options={[["default", "The provider's default"], ["on", "On"], ["off", "Off"]]} />
          <Field label="Allow only these domains (optional)" value={allow} onInput={setAllow} placeholder="pypi.org, github.com" />
          <Field label="Deny these domains (optional)" value={deny} onInput={setDeny} />
        </fieldset>
        <fieldset>
          <legend>Placement</legend>
          <Select label="Provider" value={provider} onChange={setProvider} options={[["auto", "auto: where the most of the API works"], ...PROVIDERS.map((p) => [p, p] as const)]} />
          <Check label="A terminal (pty) for this sandbox" checked={pty} onChange={setPty} />
          <Field label="Ports to expose (optional)" value={ports} onInput={setPorts} placeholder="8000, 3000"
            hint="Placed where these ports can be served as endpoints." />
          <Field label="Metadata (optional)" value={metadata} onInput={setMetadata} placeholder="team=ml, run=42" />
        </fieldset>
      </Form>
    </section>
  )
}
