"""The sync client's own primitives (the async client's are ../_async/_io.py): sleeping, running work beside the
caller (a thread), iterating input, and terminals (the async session on a loop thread of its own)."""
from __future__ import annotations

import ssl
import threading
import time
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from .. import _websocket, types
from .._async.terminal import AsyncTerminal, TerminalHandlers
from .._common import TerminalExit
from .terminal import EndedTerminal, LoopThread, Terminal

__all__ = ["sleep", "spawn", "chunks", "open_terminal", "ended_terminal"]

#: What upload and stdin take: bytes, a binary file, or an iterable of bytes.
Input = Any


def sleep(seconds: float) -> None:
    time.sleep(seconds)


class Handle:
    """Work running beside the caller (a thread); ``join`` waits for it and raises what it raised."""

    def __init__(self, function: Callable[..., Any], args: Tuple[Any, ...]) -> None:
        self._result: Any = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(function, args), daemon=True)
        self._thread.start()

    def _run(self, function: Callable[..., Any], args: Tuple[Any, ...]) -> None:
        try:
            self._result = function(*args)
        except BaseException as e:  # handed to join()
            self._error = e

    def join(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result


def spawn(function: Callable[..., Any], *args: Any) -> Handle:
    return Handle(function, args)


def chunks(data: Input, size: int = 1024 * 1024) -> Iterator[bytes]:
    """``data`` as a stream of bytes: bytes or text whole, a binary file read ``size`` at a time, or the pieces of
    an iterable."""
    if isinstance(data, str):
        yield data.encode()
    elif isinstance(data, (bytes, bytearray, memoryview)):
        yield bytes(data)
    elif hasattr(data, "read"):
        while True:
            piece = data.read(size)
            if not piece:
                return
            yield piece.encode() if isinstance(piece, str) else bytes(piece)
    else:
        for piece in data:
            yield piece.encode() if isinstance(piece, str) else bytes(piece)


def open_terminal(
    url: str,
    headers: Dict[str, str],
    process_id: str,
    handlers: TerminalHandlers,
    get_process: Callable[[], types.Process],
    ssl_context: Optional[ssl.SSLContext],
) -> Terminal:
    loop = LoopThread()

    async def connect() -> AsyncTerminal:
        ws = await _websocket.connect(url, headers, ssl_context)
        return AsyncTerminal(ws, process_id, handlers, None)

    try:
        inner = loop.run(connect())
    except BaseException:
        loop.stop()
        raise
    return Terminal(inner, loop, get_process)


def ended_terminal(process_id: str, exit: TerminalExit, state: str) -> EndedTerminal:
    return EndedTerminal(process_id, exit, state)
