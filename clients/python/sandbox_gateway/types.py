"""The gateway's records as typed dictionaries: generated from its OpenAPI document by
scripts/generate_types.py (do not edit; the tests check it matches the server's)."""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:
    from typing_extensions import NotRequired
Provider = Literal["blaxel", "cloudflare", "codesandbox", "daytona", "e2b", "freestyle", "modal", "northflank", "prime", "runloop", "vercel"]
SandboxState = Literal["requested", "routing", "provisioning", "provision_unknown", "ready", "pausing", "paused", "resuming", "runtime_unknown", "stopping", "stopped", "failed", "cleanup_pending", "cleanup_failed"]
OperationType = Literal["sandbox_create", "sandbox_pause", "sandbox_resume", "sandbox_destroy"]
OperationState = Literal["queued", "running", "reconciling", "succeeded", "failed", "cancelled"]
ProcessState = Literal["queued", "running", "cancelling", "succeeded", "failed", "cancelled", "timed_out"]


class SandboxRequest(TypedDict):
    provider: NotRequired[Union[Provider, Literal["auto"]]]
    source: Source
    resources: Resources
    lifecycle: Lifecycle
    regions: NotRequired[List[str]]
    features: NotRequired[Features]
    network: NotRequired[Network]
    fallback: NotRequired[Fallback]
    provider_options: NotRequired[ProviderOptions]
    environment: NotRequired[Dict[str, str]]
    secret_refs: NotRequired[Dict[str, str]]
    metadata: NotRequired[Dict[str, str]]


class EnvironmentSource(TypedDict):
    kind: Literal["environment"]
    environment: str
    version: NotRequired[str]


class OciImageSource(TypedDict):
    kind: Literal["oci_image"]
    image: str
    command: NotRequired[List[str]]


class ProviderTemplateSource(TypedDict):
    kind: Literal["provider_template"]
    provider: Provider
    template: str


class Resources(TypedDict):
    vcpu: float
    memory_mb: int
    disk_mb: NotRequired[int]
    architecture: NotRequired[Literal["x86_64", "arm64", "any"]]


class Lifecycle(TypedDict):
    runtime_timeout_seconds: int
    idle_timeout_seconds: NotRequired[int]
    on_runtime_timeout: NotRequired[Literal["destroy", "pause"]]
    on_idle_timeout: NotRequired[Literal["destroy", "pause"]]


class Features(TypedDict):
    isolation: NotRequired[List[Literal["microvm", "vm", "container"]]]
    pty: NotRequired[bool]
    pause_resume: NotRequired[bool]
    public_ports: NotRequired[List[int]]
    computer_use: NotRequired[bool]
    recording: NotRequired[FeaturesRecording]
    process: NotRequired[FeaturesProcess]
    filesystem: NotRequired[FeaturesFilesystem]


class FeaturesRecording(TypedDict):
    format: NotRequired[Literal["mp4"]]


class FeaturesProcess(TypedDict):
    execute: NotRequired[bool]
    ordered_output: NotRequired[bool]
    cancel: NotRequired[bool]


class FeaturesFilesystem(TypedDict):
    read: NotRequired[bool]
    write: NotRequired[bool]
    write_modes: NotRequired[List[Literal["create", "overwrite", "append"]]]
    create_parents: NotRequired[bool]
    list: NotRequired[bool]
    delete: NotRequired[bool]


class Network(TypedDict):
    internet_access: NotRequired[bool]
    allow_domains: NotRequired[List[str]]
    deny_domains: NotRequired[List[str]]


class Fallback(TypedDict):
    providers: List[Provider]
    max_attempts: NotRequired[int]


class ProviderOptions(TypedDict):
    blaxel: NotRequired[Dict[str, Any]]
    cloudflare: NotRequired[Dict[str, Any]]
    codesandbox: NotRequired[ProviderOptionsCodesandbox]
    daytona: NotRequired[Dict[str, Any]]
    e2b: NotRequired[ProviderOptionsE2b]
    freestyle: NotRequired[ProviderOptionsFreestyle]
    modal: NotRequired[Dict[str, Any]]
    northflank: NotRequired[ProviderOptionsNorthflank]
    prime: NotRequired[ProviderOptionsPrime]
    runloop: NotRequired[ProviderOptionsRunloop]
    vercel: NotRequired[Dict[str, Any]]


class ProviderOptionsCodesandbox(TypedDict):
    template_id: NotRequired[str]
    vm_tier: NotRequired[Literal["Pico", "Nano", "Micro", "Small", "Medium", "Large", "XLarge"]]


class ProviderOptionsE2b(TypedDict):
    template_id: NotRequired[str]


class ProviderOptionsFreestyle(TypedDict):
    snapshot_id: NotRequired[str]


class ProviderOptionsNorthflank(TypedDict):
    deployment_plan: NotRequired[str]
    ephemeral_storage_mb: NotRequired[int]


class ProviderOptionsPrime(TypedDict):
    team_id: NotRequired[str]


class ProviderOptionsRunloop(TypedDict):
    resource_size: NotRequired[Literal["X_SMALL", "SMALL", "MEDIUM", "LARGE", "X_LARGE", "XX_LARGE"]]
    blueprint_id: NotRequired[str]


class Sandbox(TypedDict):
    id: str
    type: Literal["sandbox"]
    project_id: str
    state: SandboxState
    state_reason: Optional[str]
    requested: SandboxRequested
    provider: Optional[Provider]
    billing_mode: Literal["managed", "byok", "emulated"]
    resolved_resources: Optional[ResolvedResources]
    resolved_network: Optional[ResolvedNetwork]
    cost_microusd: Optional[str]
    cost_updated_at: Optional[str]
    created_at: str
    updated_at: str
    ready_at: Optional[str]
    paused_at: Optional[str]
    stopped_at: Optional[str]
    expires_at: Optional[str]
    metadata: Dict[str, str]


class SandboxRequested(TypedDict):
    provider: NotRequired[Union[Provider, Literal["auto"]]]
    source: Union[SandboxRequestedSourceEnvironment, SandboxRequestedSourceOciImage, SandboxRequestedSourceProviderTemplate]
    resources: SandboxRequestedResources
    lifecycle: SandboxRequestedLifecycle
    regions: NotRequired[List[str]]
    features: NotRequired[SandboxRequestedFeatures]
    network: NotRequired[SandboxRequestedNetwork]
    fallback: NotRequired[SandboxRequestedFallback]
    provider_options: NotRequired[SandboxRequestedProviderOptions]
    environment: NotRequired[Dict[str, str]]
    secret_refs: NotRequired[Dict[str, str]]
    metadata: NotRequired[Dict[str, str]]


class SandboxRequestedSourceEnvironment(TypedDict):
    kind: Literal["environment"]
    environment: str
    version: NotRequired[str]


class SandboxRequestedSourceOciImage(TypedDict):
    kind: Literal["oci_image"]
    image: str
    command: NotRequired[List[str]]


class SandboxRequestedSourceProviderTemplate(TypedDict):
    kind: Literal["provider_template"]
    provider: Provider
    template: str


class SandboxRequestedResources(TypedDict):
    vcpu: float
    memory_mb: float
    disk_mb: NotRequired[float]
    architecture: NotRequired[Literal["x86_64", "arm64", "any"]]


class SandboxRequestedLifecycle(TypedDict):
    runtime_timeout_seconds: float
    idle_timeout_seconds: NotRequired[float]
    on_runtime_timeout: NotRequired[Literal["destroy", "pause"]]
    on_idle_timeout: NotRequired[Literal["destroy", "pause"]]


class SandboxRequestedFeatures(TypedDict):
    isolation: NotRequired[List[Literal["microvm", "vm", "container"]]]
    pty: NotRequired[bool]
    pause_resume: NotRequired[bool]
    public_ports: NotRequired[List[float]]
    computer_use: NotRequired[bool]
    recording: NotRequired[SandboxRequestedFeaturesRecording]
    process: NotRequired[SandboxRequestedFeaturesProcess]
    filesystem: NotRequired[SandboxRequestedFeaturesFilesystem]


class SandboxRequestedFeaturesRecording(TypedDict):
    format: NotRequired[Literal["mp4"]]


class SandboxRequestedFeaturesProcess(TypedDict):
    execute: NotRequired[bool]
    ordered_output: NotRequired[bool]
    cancel: NotRequired[bool]


class SandboxRequestedFeaturesFilesystem(TypedDict):
    read: NotRequired[bool]
    write: NotRequired[bool]
    write_modes: NotRequired[List[Literal["create", "overwrite", "append"]]]
    create_parents: NotRequired[bool]
    list: NotRequired[bool]
    delete: NotRequired[bool]


class SandboxRequestedNetwork(TypedDict):
    internet_access: NotRequired[bool]
    allow_domains: NotRequired[List[str]]
    deny_domains: NotRequired[List[str]]


class SandboxRequestedFallback(TypedDict):
    providers: List[Provider]
    max_attempts: NotRequired[float]


class SandboxRequestedProviderOptions(TypedDict):
    blaxel: NotRequired[Dict[str, Any]]
    cloudflare: NotRequired[Dict[str, Any]]
    codesandbox: NotRequired[SandboxRequestedProviderOptionsCodesandbox]
    daytona: NotRequired[Dict[str, Any]]
    e2b: NotRequired[SandboxRequestedProviderOptionsE2b]
    freestyle: NotRequired[SandboxRequestedProviderOptionsFreestyle]
    modal: NotRequired[Dict[str, Any]]
    northflank: NotRequired[SandboxRequestedProviderOptionsNorthflank]
    prime: NotRequired[SandboxRequestedProviderOptionsPrime]
    runloop: NotRequired[SandboxRequestedProviderOptionsRunloop]
    vercel: NotRequired[Dict[str, Any]]


class SandboxRequestedProviderOptionsCodesandbox(TypedDict):
    template_id: NotRequired[str]
    vm_tier: NotRequired[Literal["Pico", "Nano", "Micro", "Small", "Medium", "Large", "XLarge"]]


class SandboxRequestedProviderOptionsE2b(TypedDict):
    template_id: NotRequired[str]


class SandboxRequestedProviderOptionsFreestyle(TypedDict):
    snapshot_id: NotRequired[str]


class SandboxRequestedProviderOptionsNorthflank(TypedDict):
    deployment_plan: NotRequired[str]
    ephemeral_storage_mb: NotRequired[float]


class SandboxRequestedProviderOptionsPrime(TypedDict):
    team_id: NotRequired[str]


class SandboxRequestedProviderOptionsRunloop(TypedDict):
    resource_size: NotRequired[Literal["X_SMALL", "SMALL", "MEDIUM", "LARGE", "X_LARGE", "XX_LARGE"]]
    blueprint_id: NotRequired[str]


class ResolvedResources(TypedDict):
    vcpu: float
    memory_mb: int
    disk_mb: Optional[int]
    architecture: str
    provider_size: Optional[str]


class ResolvedNetwork(TypedDict):
    internet_access: bool
    source: Literal["requested", "provider_default"]
    allow_domains: Optional[List[str]]
    deny_domains: Optional[List[str]]


class SandboxList(TypedDict):
    sandboxes: List[Sandbox]
    next_cursor: Optional[str]


class Operation(TypedDict):
    id: str
    project_id: str
    type: OperationType
    state: OperationState
    resource_type: Literal["sandbox"]
    resource_id: str
    retryable: bool
    error: Optional[ErrorObject]
    created_at: str
    updated_at: str
    completed_at: Optional[str]


class ErrorObject(TypedDict):
    code: str
    message: str
    retryable: bool
    details: NotRequired[Dict[str, Any]]


class Process(TypedDict):
    id: str
    type: Literal["process"]
    project_id: str
    sandbox_id: str
    state: ProcessState
    command: List[str]
    cwd: Optional[str]
    timeout_seconds: int
    max_output_bytes: int
    output_bytes: int
    output_truncated: bool
    exit_code: Optional[int]
    termination_signal: Optional[str]
    error: Optional[ErrorObject]
    cancel_requested_at: Optional[str]
    created_at: str
    started_at: Optional[str]
    completed_at: Optional[str]
    stdin: bool
    stdin_closed_at: Optional[str]
    pty: Optional[TerminalSize]
    provider_capabilities: Optional[Capabilities]


class TerminalSize(TypedDict):
    cols: int
    rows: int


class Capabilities(TypedDict):
    provider: Provider
    version: str
    lifecycle: CapabilitiesLifecycle
    process: CapabilitiesProcess
    filesystem: CapabilitiesFilesystem
    http_endpoints: CapabilitiesHttpEndpoints
    computer: Optional[CapabilitiesComputer1]


class CapabilitiesLifecycle(TypedDict):
    pause: bool
    resume: bool


class CapabilitiesProcess(TypedDict):
    execute: bool
    cancel: bool
    ordered_output: bool
    max_timeout_seconds: int
    max_output_bytes: int


class CapabilitiesFilesystem(TypedDict):
    read: bool
    write: bool
    write_modes: List[Literal["create", "overwrite", "append"]]
    create_parents: bool
    list: bool
    delete: bool
    max_read_bytes: int
    max_write_bytes: int


class CapabilitiesHttpEndpoints(TypedDict):
    create: bool
    revoke: bool
    max_lease_seconds: int


class CapabilitiesComputer1(TypedDict):
    implementation: str
    actions: List[str]
    screenshot: CapabilitiesComputer1Screenshot
    recording: CapabilitiesComputer1Recording


class CapabilitiesComputer1Screenshot(TypedDict):
    formats: List[str]
    max_bytes: int


class CapabilitiesComputer1Recording(TypedDict):
    formats: List[str]


class Endpoint(TypedDict):
    id: str
    type: Literal["sandbox_endpoint"]
    project_id: str
    sandbox_id: str
    port: int
    protocol: str
    state: Literal["provisioning", "active", "revoking", "revoked", "expired", "failed"]
    url: str
    lease_expires_at: str
    revoked_at: Optional[str]
    error: Optional[ErrorObject]
    created_at: str
    updated_at: str
    provider_capabilities: Optional[Capabilities]


class SandboxMetrics(TypedDict):
    type: Literal["sandbox_metrics"]
    sandbox_id: str
    provider: Provider
    source: Literal["local_runtime", "provider"]
    collected_at: str
    cpu_seconds: Optional[float]
    cpu_used_percent: Optional[float]
    memory_bytes: Optional[float]
    memory_peak_bytes: Optional[float]
    memory_limit_bytes: Optional[float]
    disk_bytes: Optional[float]
    disk_limit_bytes: Optional[float]
    network_rx_bytes: Optional[float]
    network_tx_bytes: Optional[float]
    process_count: Optional[float]


class RuntimeOperation(TypedDict):
    id: str
    type: Literal["runtime_operation"]
    project_id: str
    sandbox_id: str
    kind: Literal["filesystem_read", "filesystem_write", "filesystem_list", "filesystem_delete", "computer_action", "computer_screenshot"]
    state: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    result: Optional[RuntimeOperationResult]
    error: Optional[ErrorObject]
    created_at: str
    started_at: Optional[str]
    completed_at: Optional[str]
    provider_capabilities: Optional[Capabilities]


class RuntimeOperationResultFilesystemRead(TypedDict):
    kind: Literal["filesystem_read"]
    path: str
    data_base64: str
    offset_bytes: int
    byte_length: int
    size_bytes: NotRequired[int]
    eof: bool


class RuntimeOperationResultFilesystemWrite(TypedDict):
    kind: Literal["filesystem_write"]
    path: str
    bytes_written: int
    created: bool


class RuntimeOperationResultFilesystemList(TypedDict):
    kind: Literal["filesystem_list"]
    path: str
    entries: List[RuntimeOperationResultFilesystemListEntries]
    truncated: bool


class RuntimeOperationResultFilesystemListEntries(TypedDict):
    path: str
    type: Literal["file", "directory", "symlink", "other"]
    size_bytes: int
    modified_at: str


class RuntimeOperationResultFilesystemDelete(TypedDict):
    kind: Literal["filesystem_delete"]
    path: str
    deleted: bool


class RuntimeOperationResultComputerAction(TypedDict):
    kind: Literal["computer_action"]
    action: str
    cursor_position: Optional[RuntimeOperationResultComputerActionCursorPosition1]


class RuntimeOperationResultComputerActionCursorPosition1(TypedDict):
    x: int
    y: int


class RuntimeOperationResultComputerScreenshot(TypedDict):
    kind: Literal["computer_screenshot"]
    format: Literal["png", "jpeg"]
    data_base64: str
    byte_length: int
    cursor_position: Optional[RuntimeOperationResultComputerScreenshotCursorPosition1]


class RuntimeOperationResultComputerScreenshotCursorPosition1(TypedDict):
    x: int
    y: int


class EnvironmentList(TypedDict):
    environments: List[Environment]


class Environment(TypedDict):
    name: str
    versions: List[str]
    default_version: str
    description: str
    providers: List[Provider]

Source = Union[EnvironmentSource, OciImageSource, ProviderTemplateSource]
RuntimeOperationResult = Union[RuntimeOperationResultFilesystemRead, RuntimeOperationResultFilesystemWrite, RuntimeOperationResultFilesystemList, RuntimeOperationResultFilesystemDelete, RuntimeOperationResultComputerAction, RuntimeOperationResultComputerScreenshot]
