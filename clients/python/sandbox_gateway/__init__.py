"""Sandbox Gateway's Python client: sandboxes, commands with live output and input, files of any size, endpoints,
terminals and the lifecycle, sync (``Client``) and async (``AsyncClient``).

    from sandbox_gateway import Client

    with Client("http://127.0.0.1:8080", api_key="metal_sk_…", project_id="prj_…") as gw:
        sandbox = gw.sandboxes.create("metal/python")
        print(sandbox.run(["python3", "-c", "print(6 * 7)"]).stdout)
        sandbox.destroy()

Failures raise ``GatewayError`` with the gateway's ``code``, ``status``, ``retryable``, ``details`` and
``request_id``; the records it hands over are typed (``sandbox_gateway.types``).
"""
from . import types
from ._async.client import AsyncClient, AsyncEnvironments, AsyncFiles, AsyncProcess, AsyncSandbox, AsyncSandboxes
from ._async.terminal import AsyncEndedTerminal, AsyncTerminal
from ._common import ExecResult, Page, TerminalExit
from ._sync.client import Client, Environments, Files, Process, Sandbox, Sandboxes
from ._sync.terminal import EndedTerminal, Terminal
from ._version import __version__
from .errors import GatewayError

__all__ = [
    "AsyncClient",
    "AsyncEnvironments",
    "AsyncEndedTerminal",
    "AsyncFiles",
    "AsyncProcess",
    "AsyncSandbox",
    "AsyncSandboxes",
    "AsyncTerminal",
    "Client",
    "EndedTerminal",
    "Environments",
    "ExecResult",
    "Files",
    "GatewayError",
    "Page",
    "Process",
    "Sandbox",
    "Sandboxes",
    "Terminal",
    "TerminalExit",
    "__version__",
    "types",
]
