"""The async client's own primitives (the sync client's are ../_sync/_io.py): sleeping, running work beside the
caller, iterating input, and terminals."""
from __future__ import annotations

import asyncio
import inspect
import ssl
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Optional

from .. import _websocket, types
from .._common import TerminalExit
from .terminal import AsyncEndedTerminal, AsyncTerminal, TerminalHandlers

__all__ = ["sleep", "spawn", "chunks", "open_terminal", "ended_terminal"]

#: What upload and stdin take: bytes, a binary file, or an iterable (sync or async) of bytes.
Input = Any


async def sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


class Handle:
    """Work running beside the caller (a task); ``join`` waits for it and raises what it raised."""

    def __init__(self, task: "asyncio.Future[Any]") -> None:
        self._task = task

    async def join(self) -> Any:
        return await self._task


def spawn(function: Callable[..., Awaitable[Any]], *args: Any) -> Handle:
    return Handle(asyncio.ensure_future(function(*args)))


async def chunks(data: Input, size: int = 1024 * 1024) -> AsyncIterator[bytes]:
    """``data`` as a stream of bytes: bytes or text whole, a binary file read ``size`` at a time, or the pieces of
    an iterable (an async one too)."""
    if isinstance(data, str):
        yield data.encode()
    elif isinstance(data, (bytes, bytearray, memoryview)):
        yield bytes(data)
    elif hasattr(data, "read"):
        while True:
            piece = data.read(size)
            if inspect.isawaitable(piece):
                piece = await piece
            if not piece:
                return
            yield piece.encode() if isinstance(piece, str) else bytes(piece)
    elif hasattr(data, "__aiter__"):
        async for piece in data:
            yield piece.encode() if isinstance(piece, str) else bytes(piece)
    else:
        for piece in data:
            yield piece.encode() if isinstance(piece, str) else bytes(piece)


async def open_terminal(
    url: str,
    headers: Dict[str, str],
    process_id: str,
    handlers: TerminalHandlers,
    get_process: Callable[[], Awaitable[types.Process]],
    ssl_context: Optional[ssl.SSLContext],
) -> AsyncTerminal:
    ws = await _websocket.connect(url, headers, ssl_context)
    return AsyncTerminal(ws, process_id, handlers, get_process)


def ended_terminal(process_id: str, exit: TerminalExit, state: str) -> AsyncEndedTerminal:
    return AsyncEndedTerminal(process_id, exit, state)
