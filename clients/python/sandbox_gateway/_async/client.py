"""The async client. The sync client (../_sync/client.py) is generated from this file by scripts/unasync.py: edit
this one, then run the script (the tests fail while the two differ)."""
from __future__ import annotations

import base64
import codecs
import ssl
import time
from typing import Any, AsyncIterator, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Union

import httpx

from .. import _common, types
from .._common import Command, ExecResult, Page, Stream, TerminalExit, WriteMode
from .._version import __version__
from ..errors import GatewayError, from_envelope, network_error
from . import _io
from .terminal import AsyncEndedTerminal, AsyncTerminal, TerminalHandlers

OutputHandler = Callable[[Stream, str], None]


class AsyncClient:
    """A client for one project of a Sandbox Gateway.

    ``attempts`` is how many times a retryable failure (no answer, 429, 5xx, or the envelope's ``retryable``) is
    tried, the first included; a retried create or command keeps its Idempotency-Key, so it is made once.
    ``transport`` replaces httpx's (a proxy, a test's), ``ssl_context`` is for ``wss://`` terminals.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        project_id: str,
        *,
        attempts: int = 4,
        timeout: float = 60.0,
        transport: Optional[httpx.AsyncBaseTransport] = None,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.project_id = project_id
        self._attempts = max(1, attempts)
        self._auth = {"authorization": f"Bearer {api_key}", "x-metal-project-id": project_id}
        self._ssl_context = ssl_context
        extra: Dict[str, Any] = {} if transport is None else {"transport": transport}
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers={**self._auth, "user-agent": f"sandbox-gateway-python/{__version__}"},
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
            **extra,
        )
        self.sandboxes = AsyncSandboxes(self)
        self.environments = AsyncEnvironments(self)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Any = None,
        json_body: Any = None,
        content: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        stream: bool = False,
        resend: bool = True,
    ) -> httpx.Response:
        """One call, retried while its failure is retryable. With ``resend=False`` it is sent again only when it
        surely was not received (no connection, or 429): for a call that is not safe to apply twice."""
        for attempt in range(1, self._attempts + 1):
            error: GatewayError
            request = self._http.build_request(
                method,
                path,
                params=params,
                json=json_body,
                content=content,
                headers=headers,
                timeout=httpx.Timeout(timeout) if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
            try:
                response = await self._http.send(request, stream=stream)
            except httpx.TransportError as e:
                error = network_error(e)
                if not resend and not isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout)):
                    error.retryable = False
            else:
                if response.status_code < 300:
                    return response
                await response.aread()
                try:
                    body = response.json()
                except ValueError:
                    body = None
                error = from_envelope(response.status_code, body, response.headers.get("x-request-id"))
                if not resend and response.status_code != 429:
                    error.retryable = False
            if not error.retryable or attempt >= self._attempts:
                raise error
            await _io.sleep(_common.backoff(attempt))
        raise AssertionError("unreachable")

    async def _json(self, method: str, path: str, **options: Any) -> Any:
        response = await self._send(method, path, **options)
        return response.json()

    async def _follow(self, path: str, on_event: Callable[[str, Any], None]) -> None:
        """Follows an event stream (``…/events?follow=true``) to its end: each event's ``data`` as it arrives. A
        dropped stream is resumed from the last event seen (Last-Event-ID): none is lost or repeated. An
        ``event: error`` frame (the key was revoked or expired) raises its envelope."""
        last_id: Optional[str] = None
        for resume in range(_common.RESUMES + 1):
            headers = {"accept": "text/event-stream", **({"last-event-id": last_id} if last_id is not None else {})}
            try:
                # Heartbeats come every 15 s: a minute of silence is a dead connection.
                response = await self._send("GET", path, params={"follow": "true"}, headers=headers, timeout=60.0, stream=True)
                try:
                    parser = _common.SseParser()
                    async for chunk in response.aiter_bytes():
                        for frame in parser.feed(chunk):
                            payload = _common.event_payload(frame)
                            if frame.event == "error" and frame.id is None:
                                raise from_envelope(0, payload)
                            if frame.id is not None:
                                last_id = frame.id
                            on_event(frame.event, payload.get("data"))
                finally:
                    await response.aclose()
                return
            except httpx.TransportError as e:
                if resume >= _common.RESUMES:
                    raise network_error(e)
            await _io.sleep(_common.backoff(resume + 1))

    async def _wait_operation(self, operation_id: str, timeout: float) -> types.Operation:
        """The operation once it has ended, or as it is after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            operation: types.Operation = await self._json("GET", f"/v1/operations/{operation_id}")
            if operation["state"] in _common.OPERATION_ENDED or time.monotonic() > deadline:
                return operation
            await _io.sleep(_common.POLL_SECONDS)


def _operation_error(operation: types.Operation, what: str) -> GatewayError:
    error: Dict[str, Any] = dict(operation.get("error") or {})
    return GatewayError(
        error.get("code") or "operation_failed",
        error.get("message") or f"The {what} ended {operation['state']}",
        0,
        operation.get("retryable", False),
        error.get("details"),
    )


class AsyncEnvironments:
    """The catalogue of what ``create`` can name as its environment."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def list(self) -> List[types.Environment]:
        """The environments (``name``, ``versions``, ``default_version``, ``description``) and the configured
        providers that create each."""
        catalogue: types.EnvironmentList = await self._client._json("GET", "/v1/environments")
        return catalogue["environments"]


class AsyncSandboxes:
    """Create, find and list the project's sandboxes."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(
        self,
        environment: str = "metal/base",
        *,
        image: Optional[str] = None,
        source: Optional[types.Source] = None,
        resources: Optional[types.Resources] = None,
        lifecycle: Optional[types.Lifecycle] = None,
        provider: Union[types.Provider, Literal["auto"], None] = None,
        features: Optional[types.Features] = None,
        network: Optional[types.Network] = None,
        fallback: Optional[types.Fallback] = None,
        metadata: Optional[Mapping[str, str]] = None,
        env: Optional[Mapping[str, str]] = None,
        provider_options: Optional[types.ProviderOptions] = None,
        request: Optional[types.SandboxRequest] = None,
        wait: bool = True,
        wait_timeout: float = 300.0,
    ) -> "AsyncSandbox":
        """Creates a sandbox and (unless ``wait=False``) returns once it is ready.

        The source is the environment named (``metal/base``, ``metal/node``, ``metal/python``), or ``image`` (an
        OCI image reference), or ``source`` as the API takes it. ``resources`` defaults to 1 vCPU and 512 MB,
        ``lifecycle`` to an hour's runtime; ``env`` is the environment of every process. ``request`` sends a whole
        request body as the API takes it instead. A create whose answer is lost is sent again with the same
        Idempotency-Key: one call makes at most one sandbox.
        """
        if request is None:
            if source is None and image is not None:
                source = {"kind": "oci_image", "image": image}
            elif source is None:
                source = {"kind": "environment", "environment": environment}
            chosen: Dict[str, Any] = {
                "source": source,
                "resources": resources or {"vcpu": 1, "memory_mb": 512},
                "lifecycle": lifecycle or {"runtime_timeout_seconds": 3600},
            }
            optional = {"provider": provider, "features": features, "network": network, "fallback": fallback, "provider_options": provider_options}
            chosen.update({key: value for key, value in optional.items() if value is not None})
            if metadata is not None:
                chosen["metadata"] = dict(metadata)
            if env is not None:
                chosen["environment"] = dict(env)
            body: Any = chosen
        else:
            body = request
        key = _common.idempotency_key()
        mutation = await self._client._json("POST", "/v1/sandboxes", json_body=body, headers={"idempotency-key": key})
        if not wait:
            return AsyncSandbox(self._client, mutation["sandbox"])
        operation = await self._client._wait_operation(mutation["operation"]["id"], wait_timeout)
        if operation["state"] != "succeeded":
            if operation["state"] not in _common.OPERATION_ENDED:
                raise GatewayError("wait_timeout", f"The sandbox was not ready within {wait_timeout:g} s ({operation['state']})", 0, True)
            raise _operation_error(operation, "create")
        return await self.get(mutation["sandbox"]["id"])

    async def get(self, sandbox_id: str) -> "AsyncSandbox":
        return AsyncSandbox(self._client, await self._client._json("GET", f"/v1/sandboxes/{sandbox_id}"))

    async def list(
        self,
        *,
        state: Union[types.SandboxState, Sequence[types.SandboxState], None] = None,
        provider: Optional[types.Provider] = None,
        metadata: Optional[Mapping[str, str]] = None,
        limit: int = 50,
        cursor: Optional[str] = None,
    ) -> "Page[AsyncSandbox]":
        """One page of the project's sandboxes, newest first: any of ``state``, on ``provider``, whose metadata has
        every pair of ``metadata``. Pass ``next_cursor`` back as ``cursor`` for the next page."""
        params: List[Any] = [("limit", str(limit))]
        states = [state] if isinstance(state, str) else list(state or [])
        params += [("state", s) for s in states]
        if provider is not None:
            params.append(("provider", provider))
        params += [(f"metadata.{k}", v) for k, v in (metadata or {}).items()]
        if cursor is not None:
            params.append(("cursor", cursor))
        page: types.SandboxList = await self._client._json("GET", "/v1/sandboxes", params=params)
        return Page([AsyncSandbox(self._client, record) for record in page["sandboxes"]], page["next_cursor"])


class AsyncSandbox:
    """One sandbox: its commands, files, endpoints, terminals and lifecycle. ``record`` is the sandbox as the
    gateway last described it (``refresh()`` asks again)."""

    def __init__(self, client: AsyncClient, record: types.Sandbox) -> None:
        self._client = client
        self.id: str = record["id"]
        self.record = record
        self.files = AsyncFiles(self)
        self._capabilities: Optional[types.Capabilities] = None

    def __repr__(self) -> str:
        return f"<Sandbox {self.id} {self.record['state']} on {self.record['provider']}>"

    @property
    def state(self) -> types.SandboxState:
        return self.record["state"]

    @property
    def provider(self) -> Optional[types.Provider]:
        return self.record["provider"]

    def _path(self, tail: str = "") -> str:
        return f"/v1/sandboxes/{self.id}{tail}"

    async def refresh(self) -> types.Sandbox:
        self.record = await self._client._json("GET", self._path())
        return self.record

    async def capabilities(self) -> types.Capabilities:
        """What the sandbox's provider can do (asked once)."""
        if self._capabilities is None:
            self._capabilities = await self._client._json("GET", self._path("/capabilities"))
        return self._capabilities

    # Commands

    async def start(
        self,
        command: Command,
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout: int = 300,
        stdin: bool = False,
    ) -> "AsyncProcess":
        """Starts a command and returns at once (a server, a long job): ``wait()`` for it, ``cancel()`` it. A list
        is the argv; a string is a shell line (``sh -c``). ``stdin=True`` keeps its input open for ``write``."""
        record = await self._start(command, cwd=cwd, env=env, timeout=timeout, stdin=stdin)
        return AsyncProcess(self, record)

    async def _start(self, command: Command, *, wait_seconds: Optional[int] = None, **options: Any) -> Dict[str, Any]:
        body: Dict[str, Any] = {"command": _common.argv(command), "timeout_seconds": options["timeout"], "max_output_bytes": options.get("max_output_bytes", _common.MAX_OUTPUT_BYTES)}
        if options.get("cwd") is not None:
            body["cwd"] = options["cwd"]
        if options.get("env") is not None:
            body["environment"] = dict(options["env"])
        if options.get("stdin"):
            body["stdin"] = True
        if options.get("pty") is not None:
            body["pty"] = options["pty"]
        params = {"wait_seconds": str(wait_seconds)} if wait_seconds is not None else None
        started: Dict[str, Any] = await self._client._json(
            "POST",
            self._path("/processes"),
            json_body=body,
            params=params,
            headers={"idempotency-key": _common.idempotency_key()},
            timeout=(wait_seconds + 60.0) if wait_seconds is not None else None,
        )
        return started

    async def exec(
        self,
        command: Command,
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout: int = 300,
        stdin: Optional[_io.Input] = None,
        on_output: Optional[OutputHandler] = None,
    ) -> ExecResult:
        """Runs a command and returns how it ended, with its output. A list is the argv; a string is a shell line
        (``sh -c``). ``on_output(stream, text)`` gets each piece of output as it is written (the process's event
        stream, followed live); ``stdin`` (text, bytes, a binary file or an iterable of bytes) is written to the
        process as it comes, then closed (providers that take input). Without either it is ``run``: one call."""
        if on_output is None and stdin is None:
            return await self.run(command, cwd=cwd, env=env, timeout=timeout)
        process = await self.start(command, cwd=cwd, env=env, timeout=timeout, stdin=stdin is not None)
        feeding = _io.spawn(process.feed, stdin) if stdin is not None else None
        try:
            result = await process.wait(on_output=on_output)
        finally:
            if feeding is not None:
                await feeding.join()
        return result

    async def run(self, command: Command, *, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None, timeout: int = 300) -> ExecResult:
        """Runs a command and returns its exit code and output, in one call when it ends within the API's longest
        wait (5 minutes; past that, or past the answer's 1 MiB of each stream, the output is read from its events)."""
        wait = min(timeout, _common.MAX_WAIT_SECONDS)
        started = await self._start(command, cwd=cwd, env=env, timeout=timeout, wait_seconds=wait)
        if "stdout" in started and not started.get("output_capped"):
            out = base64.b64decode(started["stdout_base64"]) if "stdout_base64" in started else started["stdout"].encode()
            err = base64.b64decode(started["stderr_base64"]) if "stderr_base64" in started else started["stderr"].encode()
            return ExecResult(started["id"], started["state"], started["exit_code"], started["stdout"], started["stderr"], out, err)
        return await AsyncProcess(self, started).wait()

    def process(self, process_id: str) -> "AsyncProcess":
        """A process of this sandbox by its id (``refresh()`` reads it)."""
        return AsyncProcess(self, {"id": process_id})

    # Terminals

    async def terminal(
        self,
        command: Command,
        *,
        cols: int = 80,
        rows: int = 24,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[int] = None,
        on_output: Optional[Callable[[str], None]] = None,
        on_data: Optional[Callable[[bytes], None]] = None,
        on_exit: Optional[Callable[[TerminalExit], None]] = None,
        on_error: Optional[Callable[[GatewayError], None]] = None,
    ) -> Union[AsyncTerminal, AsyncEndedTerminal]:
        """Starts a command on a terminal (a pty) and attaches to it: ``write``, ``resize``, ``close``, ``wait``.
        Needs a provider with terminals (create with ``features={"pty": True}``). ``timeout`` defaults to an
        hour, or the provider's longest if shorter."""
        caps = await self.capabilities()
        record = await self._start(
            command,
            cwd=cwd,
            env={"TERM": "xterm-256color", **(env or {})},
            timeout=timeout or min(3600, caps["process"]["max_timeout_seconds"] or 3600),
            max_output_bytes=min(_common.TERMINAL_OUTPUT_BYTES, caps["process"]["max_output_bytes"] or _common.MAX_OUTPUT_BYTES),
            stdin=True,
            pty={"cols": cols, "rows": rows},
        )
        try:
            return await self.attach(record["id"], on_output=on_output, on_data=on_data, on_exit=on_exit, on_error=on_error)
        except BaseException:
            # Nobody can type into it: it would only wait for its timeout.
            try:
                await AsyncProcess(self, record).cancel()
            except GatewayError:
                pass
            raise

    async def shell(
        self,
        *,
        cols: int = 80,
        rows: int = 24,
        env: Optional[Mapping[str, str]] = None,
        on_output: Optional[Callable[[str], None]] = None,
        on_data: Optional[Callable[[bytes], None]] = None,
        on_exit: Optional[Callable[[TerminalExit], None]] = None,
    ) -> Union[AsyncTerminal, AsyncEndedTerminal]:
        """An interactive shell (bash where there is one, else sh) on a terminal: see ``terminal``."""
        return await self.terminal(_common.DEFAULT_SHELL, cols=cols, rows=rows, env=env, on_output=on_output, on_data=on_data, on_exit=on_exit)

    async def attach(
        self,
        process_id: str,
        *,
        after: Optional[int] = None,
        on_output: Optional[Callable[[str], None]] = None,
        on_data: Optional[Callable[[bytes], None]] = None,
        on_exit: Optional[Callable[[TerminalExit], None]] = None,
        on_error: Optional[Callable[[GatewayError], None]] = None,
    ) -> Union[AsyncTerminal, AsyncEndedTerminal]:
        """Attaches to a process started on a terminal: its output from the start (or after event ``after``), then
        live. A process that already ended hands over its kept output, and ``wait`` returns at once."""
        handlers = TerminalHandlers(on_output, on_data, on_exit, on_error)
        process = self.process(process_id)
        query = f"?after={after}" if after is not None else ""
        url = self._client.base_url.replace("http", "ws", 1) + self._path(f"/processes/{process_id}/attach{query}")
        try:
            return await _io.open_terminal(url, self._client._auth, process_id, handlers, process.refresh, self._client._ssl_context)
        except GatewayError as e:
            if e.code != "invalid_process_state":
                raise
            record = await process.refresh()
            if record.get("pty") is None or record["state"] not in _common.PROCESS_ENDED:
                raise
        # Ended before the attach: its output as kept, then its end.
        await process._replay_terminal(handlers)
        ended = TerminalExit(record["state"], record["exit_code"])
        if on_exit is not None:
            on_exit(ended)
        return _io.ended_terminal(process_id, ended, record["state"])

    # Endpoints

    async def expose(self, port: int, *, lease_seconds: int = 3600) -> types.Endpoint:
        """Serves ``port`` of the sandbox at a URL (``["url"]``); returns once the endpoint is active."""
        endpoint: types.Endpoint = await self._client._json(
            "POST",
            self._path("/endpoints"),
            json_body={"port": port, "protocol": "http", "lease_seconds": lease_seconds},
            headers={"idempotency-key": _common.idempotency_key()},
        )
        while endpoint["state"] == "provisioning":
            await _io.sleep(_common.POLL_SECONDS)
            listing = await self._client._json("GET", self._path("/endpoints"), params={"limit": "100"})
            endpoint = next((e for e in listing["endpoints"] if e["id"] == endpoint["id"]), endpoint)
        if endpoint["state"] != "active":
            error: Dict[str, Any] = dict(endpoint.get("error") or {})
            raise GatewayError(error.get("code") or "endpoint_failed", error.get("message") or f"The endpoint is {endpoint['state']}", 0, False, error.get("details"))
        return endpoint

    async def unexpose(self, endpoint_id: str) -> None:
        """Revokes an endpoint: it stops serving at once."""
        await self._client._json("DELETE", self._path(f"/endpoints/{endpoint_id}"))

    # Lifecycle

    async def _mutate(self, method: str, tail: str, what: str, timeout: float) -> types.Operation:
        # Pause, resume and delete are idempotent by state: sending one again is safe without a key.
        mutation = await self._client._json(method, self._path(tail))
        self.record = mutation["sandbox"]
        operation = await self._client._wait_operation(mutation["operation"]["id"], timeout)
        if operation["state"] != "succeeded":
            raise _operation_error(operation, what)
        await self.refresh()
        return operation

    async def pause(self, *, timeout: float = 120.0) -> types.Operation:
        """Pauses the sandbox (every process frozen); returns once it is paused."""
        return await self._mutate("POST", "/actions/pause", "pause", timeout)

    async def resume(self, *, timeout: float = 120.0) -> types.Operation:
        """Resumes a paused sandbox; returns once it is ready."""
        return await self._mutate("POST", "/actions/resume", "resume", timeout)

    async def destroy(self, *, timeout: float = 120.0) -> types.Operation:
        """Destroys the sandbox; returns once it is stopped."""
        return await self._mutate("DELETE", "", "destroy", timeout)

    async def extend(self, seconds: int) -> types.Sandbox:
        """Moves the runtime deadline to ``seconds`` from now (``record["expires_at"]``)."""
        self.record = await self._client._json("POST", self._path("/actions/extend"), json_body={"runtime_timeout_seconds": seconds})
        return self.record

    async def metrics(self) -> types.SandboxMetrics:
        """What the sandbox consumes now: CPU, memory, disk, network, processes."""
        metrics: types.SandboxMetrics = await self._client._json("GET", self._path("/metrics"))
        return metrics


class AsyncProcess:
    """A command in a sandbox: its output, its input, its end."""

    def __init__(self, sandbox: AsyncSandbox, record: Dict[str, Any]) -> None:
        self._sandbox = sandbox
        self._client = sandbox._client
        self.id: str = record["id"]
        self.record = record

    def __repr__(self) -> str:
        return f"<Process {self.id} {self.record.get('state', '?')}>"

    def _path(self, tail: str = "") -> str:
        return self._sandbox._path(f"/processes/{self.id}{tail}")

    async def refresh(self) -> types.Process:
        self.record = await self._client._json("GET", self._path())
        return self.record  # type: ignore[return-value]

    async def write(self, data: Union[str, bytes], *, eof: bool = False) -> None:
        """Writes to the process's standard input (at most 1 MiB a call; ``eof`` closes it after). Not sent twice:
        a call whose answer was lost is not retried."""
        payload = data.encode() if isinstance(data, str) else bytes(data)
        body = {"data_base64": base64.b64encode(payload).decode(), "eof": eof}
        await self._client._json("POST", self._path("/stdin"), json_body=body, resend=False)

    async def close_stdin(self) -> None:
        await self.write(b"", eof=True)

    async def feed(self, data: _io.Input) -> None:
        """Writes ``data`` (text, bytes, a binary file, an iterable of bytes) in pieces of at most 1 MiB, in order,
        then closes the input. A process that has ended stops it quietly, as a pipe does."""
        try:
            async for piece in _io.chunks(data, _common.STDIN_PIECE):
                for at in range(0, len(piece), _common.STDIN_PIECE):
                    await self.write(piece[at : at + _common.STDIN_PIECE])
            await self.close_stdin()
        except GatewayError as e:
            if e.code != "invalid_process_state":
                raise

    async def cancel(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; the process ends ``cancelled``."""
        await self._client._json("POST", self._path("/actions/cancel"))

    async def wait(self, *, on_output: Optional[OutputHandler] = None) -> ExecResult:
        """Follows the output to the end (``on_output(stream, text)`` for each piece as it comes) and returns how
        the process ended."""
        out: Dict[str, List[bytes]] = {"stdout": [], "stderr": []}
        decoders = {"stdout": codecs.getincrementaldecoder("utf-8")("replace"), "stderr": codecs.getincrementaldecoder("utf-8")("replace")}

        def on_event(kind: str, data: Any) -> None:
            if kind not in out or not isinstance(data, dict):
                return
            piece = base64.b64decode(data.get("data_base64", ""))
            out[kind].append(piece)
            if on_output is not None:
                text = decoders[kind].decode(piece)
                if text:
                    on_output(kind, text)  # type: ignore[arg-type]

        await self._client._follow(self._path("/events"), on_event)
        record = await self.refresh()
        while record["state"] not in _common.PROCESS_ENDED:
            await _io.sleep(_common.POLL_SECONDS)
            record = await self.refresh()
        stdout, stderr = b"".join(out["stdout"]), b"".join(out["stderr"])
        return ExecResult(self.id, record["state"], record["exit_code"], stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"), stdout, stderr)

    async def _replay_terminal(self, handlers: TerminalHandlers) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")

        def on_event(kind: str, data: Any) -> None:
            if kind not in ("stdout", "stderr") or not isinstance(data, dict):
                return
            piece = base64.b64decode(data.get("data_base64", ""))
            if handlers.on_data is not None:
                handlers.on_data(piece)
            text = decoder.decode(piece)
            if handlers.on_output is not None and text:
                handlers.on_output(text)

        await self._client._follow(self._path("/events"), on_event)


class AsyncFiles:
    """The sandbox's files, through the raw file routes (the bytes themselves, no base64, nothing to poll)."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sandbox = sandbox
        self._client = sandbox._client
        self._path = sandbox._path("/files/content")

    async def _raw(self, method: str, path: str, *, headers: Optional[Mapping[str, str]] = None, content: Optional[bytes] = None, query: Optional[Mapping[str, str]] = None, stream: bool = False, resend: bool = True) -> httpx.Response:
        params = {"path": path, **(query or {})}
        return await self._client._send(method, self._path, params=params, headers=headers, content=content, stream=stream, resend=resend, timeout=300.0)

    async def read(self, path: str, *, start: Optional[int] = None, end: Optional[int] = None) -> bytes:
        """The file's bytes (``start``/``end``: a byte range, ``end`` inclusive)."""
        headers = {"range": f"bytes={start or 0}-{'' if end is None else end}"} if start is not None or end is not None else None
        return (await self._raw("GET", path, headers=headers)).content

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (await self.read(path)).decode(encoding)

    async def write(self, path: str, data: Union[str, bytes], *, mode: WriteMode = "overwrite") -> int:
        """Writes the file, making its parents: ``mode`` ``create`` (``file_exists`` if it exists), ``overwrite``
        or ``append``. At most the provider's largest write (10 MiB today): ``upload`` takes any size. Returns the
        file's size."""
        body = data.encode() if isinstance(data, str) else bytes(data)
        response = await self._raw(
            "PUT",
            path,
            headers={"content-type": "application/octet-stream"},
            content=body,
            query={"mode": mode, "create_parents": "true"},
            resend=mode != "append",
        )
        return int(response.json()["size_bytes"])

    async def download(self, path: str, *, on_progress: Optional[Callable[[int, Optional[int]], None]] = None) -> AsyncIterator[bytes]:
        """The file's bytes as they stream in, any size. A broken connection is resumed where it stopped (a Range
        read of the rest, refused as ``download_conflict`` if the file changed meanwhile). ``on_progress(received,
        total)`` after each piece."""
        received = 0
        total: Optional[int] = None
        etag: Optional[str] = None
        for resume in range(_common.RESUMES + 1):
            # Always a Range read: its Content-Range tells the size even when the body streams without a length.
            try:
                response = await self._raw("GET", path, headers={"range": f"bytes={received}-"}, stream=True)
            except GatewayError as e:
                if received == 0 and e.status == 416 and isinstance(e.details, dict) and e.details.get("size_bytes") == 0:
                    if on_progress is not None:
                        on_progress(0, 0)
                    return  # an empty file
                raise
            try:
                size_text = response.headers.get("content-range", "").rsplit("/", 1)[-1]
                size = int(size_text) if size_text.isdigit() else None
                if received == 0:
                    total = size
                    etag = response.headers.get("etag")
                    if on_progress is not None:
                        on_progress(0, total)
                elif response.status_code != 206 or size != total or (etag is not None and response.headers.get("etag") != etag):
                    raise GatewayError("download_conflict", f"{path} changed while it was read", 0, False)
                try:
                    async for chunk in response.aiter_bytes():
                        received += len(chunk)
                        yield chunk
                        if on_progress is not None:
                            on_progress(received, total)
                    if total is None or received >= total:
                        return
                except httpx.TransportError as e:
                    if resume >= _common.RESUMES:
                        raise network_error(e)
            finally:
                await response.aclose()
            await _io.sleep(_common.backoff(resume + 1))
        raise GatewayError("network_error", f"The download of {path} broke off at {received} bytes", 0, True)

    async def upload(self, path: str, data: _io.Input, *, on_progress: Optional[Callable[[int], None]] = None, piece_bytes: Optional[int] = None) -> int:
        """Writes a file of any size from bytes, a binary file or an iterable of bytes, in pieces of at most the
        provider's largest write (each retried on its own): appended where the provider appends, else written beside
        the file and joined onto it by a command in the sandbox. Returns the bytes written."""
        caps = await self._sandbox.capabilities()
        largest = caps["filesystem"]["max_write_bytes"] or _common.MAX_OUTPUT_BYTES
        size = max(1, min(largest, piece_bytes or largest))
        append = "append" in caps["filesystem"]["write_modes"]
        parts: List[str] = []
        token = _common.idempotency_key()[-8:]
        folder, _, name = path.rpartition("/")
        sent = 0
        pieces = 0
        try:
            async for piece in _pieces(_io.chunks(data, size), size):
                if pieces == 0:
                    await self.write(path, piece)
                elif append:
                    try:
                        await self._append_once(path, piece, sent)
                    except GatewayError as e:
                        # Refused outright on the first append (a provider whose append has a total ceiling): join.
                        if pieces != 1 or e.retryable or e.code == "upload_conflict":
                            raise
                        append = False
                if pieces > 0 and not append:
                    parts.append(f"{folder}/.{name}.{token}.part{len(parts)}")
                    await self.write(parts[-1], piece)
                pieces += 1
                sent += len(piece)
                if on_progress is not None:
                    on_progress(sent)
            if pieces == 0:
                await self.write(path, b"")
            if parts:
                joined = await self._sandbox.run(["sh", "-c", 'cat -- "$@" >> "$0" && rm -f -- "$@"', path, *parts], timeout=600)
                if joined.exit_code != 0:
                    raise GatewayError("upload_failed", f"Joining the pieces of {path} failed: {joined.stderr.strip() or joined.state}", 0, False)
                parts = []
        finally:
            if parts:
                try:
                    await self._sandbox.run(["rm", "-f", "--", *parts])
                except GatewayError:
                    pass
        return sent

    async def _append_once(self, path: str, piece: bytes, before: int) -> None:
        """An append that is safe to send again: after a lost answer, the file's size says whether it was applied."""
        for attempt in range(1, self._client._attempts + 1):
            try:
                await self.write(path, piece, mode="append")
                return
            except GatewayError as e:
                if e.code != "network_error" or attempt >= self._client._attempts:
                    raise
            await _io.sleep(_common.backoff(attempt))
            now = await self.size(path)
            if now == before + len(piece):
                return
            if now != before:
                raise GatewayError("upload_conflict", f"{path} changed during the upload ({now} bytes, expected {before})", 0, False)

    async def size(self, path: str) -> int:
        """The file's size (a one-byte Range read)."""
        try:
            response = await self._raw("GET", path, headers={"range": "bytes=0-0"})
        except GatewayError as e:
            if e.status == 416:
                return 0  # an empty file
            raise
        size_text = response.headers.get("content-range", "").rsplit("/", 1)[-1]
        return int(size_text) if size_text.isdigit() else int(response.headers.get("content-length", "0"))

    async def list(self, path: str, *, recursive: bool = False, max_entries: int = 10000) -> List[Dict[str, Any]]:
        """The entries under ``path``: ``path``, ``type``, ``size_bytes``, ``modified_at``."""
        result = await self._operation("/filesystem/list", {"path": path, "recursive": recursive, "max_entries": max_entries})
        return list(result["entries"])

    async def remove(self, path: str, *, recursive: bool = False) -> bool:
        """Deletes a file (or, ``recursive``, a directory and what it holds). Returns whether something was deleted."""
        result = await self._operation("/filesystem/delete", {"path": path, "recursive": recursive}, idempotent=True)
        return bool(result["deleted"])

    async def _operation(self, route: str, body: Dict[str, Any], *, idempotent: bool = False) -> Dict[str, Any]:
        headers = {"idempotency-key": _common.idempotency_key()} if idempotent else None
        operation = await self._client._json("POST", self._sandbox._path(route), json_body=body, headers=headers)
        while operation["state"] in ("queued", "running"):
            await _io.sleep(0.02)
            operation = await self._client._json("GET", self._sandbox._path(f"/runtime-operations/{operation['id']}"))
        if operation["state"] != "succeeded":
            error = operation.get("error") or {}
            raise GatewayError(error.get("code") or "runtime_operation_failed", error.get("message") or f"The file operation ended {operation['state']}", 0, bool(error.get("retryable")), error.get("details"))
        result: Dict[str, Any] = operation["result"]
        return result


async def _pieces(stream: AsyncIterator[bytes], size: int) -> AsyncIterator[bytes]:
    """``stream`` cut (or gathered) into pieces of exactly ``size`` bytes, the last one shorter."""
    buffer = bytearray()
    async for chunk in stream:
        buffer += chunk
        while len(buffer) >= size:
            yield bytes(buffer[:size])
            del buffer[:size]
    if buffer:
        yield bytes(buffer)
