"""A terminal session over `GET …/processes/{id}/attach` (a WebSocket): output arrives as binary frames, typed input
leaves as binary frames (at most 1 MiB each), a resize as a text frame, and the process's end as a text frame
``{"type":"exit","state","exit_code"}`` followed by a normal close. Closing the session leaves the process running;
another attach takes the process over (this one is then closed with 4000)."""
from __future__ import annotations

import asyncio
import codecs
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Dict, Optional, Union

from .. import _websocket, types
from .._common import PROCESS_ENDED, TerminalExit
from ..errors import GatewayError

#: The gateway's own close codes: another attach took over; the credential may no longer attach.
TAKEN_OVER = 4000
ACCESS_ENDED = 4001
MAX_INPUT_FRAME = 1024 * 1024


@dataclass(frozen=True)
class TerminalHandlers:
    #: Each piece of output as it arrives, decoded as UTF-8 (a character split across pieces waits for the rest).
    on_output: Optional[Callable[[str], None]] = None
    #: The same output as raw bytes (what a real terminal would be given).
    on_data: Optional[Callable[[bytes], None]] = None
    #: The process ended (before ``wait`` returns).
    on_exit: Optional[Callable[[TerminalExit], None]] = None
    #: The gateway could not apply a frame this session sent (an error frame).
    on_error: Optional[Callable[[GatewayError], None]] = None


def closed_error() -> GatewayError:
    return GatewayError("attach_closed", "The terminal session is closed", 0, False)


class AsyncTerminal:
    """An open terminal: ``write`` into it, ``resize`` it, ``close`` it (the process goes on), ``wait`` for its end.

    ``wait`` raises GatewayError when the session ends first: ``attach_closed`` (``close()``), ``attach_taken_over``
    (another attach took the process), ``attach_lost`` (the connection dropped; retryable), or the gateway's
    ``unauthenticated`` / ``forbidden`` once the key was revoked or expired or its project deleted.
    """

    def __init__(
        self,
        ws: _websocket.WebSocket,
        process_id: str,
        handlers: TerminalHandlers,
        get_process: Optional[Callable[[], Awaitable[types.Process]]],
    ) -> None:
        self.process_id = process_id
        self._ws = ws
        self._handlers = handlers
        self._get_process = get_process
        self._closed_by_us = False
        self._reader = asyncio.ensure_future(self._read())
        # A session nobody waits on (closed, say) must not log an exception that was never retrieved.
        self._reader.add_done_callback(lambda task: task.cancelled() or task.exception())

    async def write(self, data: Union[str, bytes]) -> None:
        """Types bytes (or UTF-8 text) into the terminal, in order."""
        payload = data.encode() if isinstance(data, str) else bytes(data)
        if self._reader.done() or self._closed_by_us:
            raise closed_error()
        try:
            for at in range(0, max(len(payload), 1), MAX_INPUT_FRAME):
                await self._ws.send(_websocket.BINARY, payload[at : at + MAX_INPUT_FRAME])
        except (_websocket.ConnectionClosed, ConnectionError, OSError):
            raise closed_error()

    async def resize(self, cols: int, rows: int) -> None:
        """Resizes the terminal (1–1000 each way); the program sees SIGWINCH."""
        if self._reader.done() or self._closed_by_us:
            raise closed_error()
        try:
            await self._ws.send(_websocket.TEXT, json.dumps({"type": "resize", "cols": cols, "rows": rows}).encode())
        except (_websocket.ConnectionClosed, ConnectionError, OSError):
            raise closed_error()

    async def close(self) -> None:
        """Leaves the terminal: the process goes on (attach again to come back); ``wait`` then raises attach_closed."""
        if self._reader.done():
            return
        self._closed_by_us = True
        await self._ws.close(1000, "detached")

    async def wait(self) -> TerminalExit:
        """The process's end. A connection that dropped as the process ended is its end: the process says how."""
        try:
            return await asyncio.shield(self._reader)
        except GatewayError as e:
            if e.code != "attach_lost" or self._get_process is None:
                raise
            try:
                process = await self._get_process()
            except GatewayError:
                raise e
            if process.get("state") in PROCESS_ENDED:
                return TerminalExit(process["state"], process.get("exit_code"))
            raise

    async def __aenter__(self) -> "AsyncTerminal":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _read(self) -> TerminalExit:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        exited: Optional[TerminalExit] = None
        last_error: Optional[Dict[str, Any]] = None
        h = self._handlers
        try:
            while True:
                kind, payload = await self._ws.recv()
                if kind == _websocket.TEXT:
                    try:
                        frame = json.loads(payload)
                    except ValueError:
                        continue
                    if not isinstance(frame, dict):
                        continue
                    if frame.get("type") == "exit":
                        exited = TerminalExit(frame.get("state"), frame.get("exit_code"))  # type: ignore[arg-type]
                        if h.on_exit:
                            h.on_exit(exited)
                    elif frame.get("type") == "error":
                        last_error = frame
                        if h.on_error:
                            h.on_error(GatewayError(str(frame.get("code")), str(frame.get("message")), 0, False))
                    continue
                if h.on_data:
                    h.on_data(payload)
                if h.on_output:
                    text = decoder.decode(payload)
                    if text:
                        h.on_output(text)
        except _websocket.ConnectionClosed as closed:
            if exited is not None:
                return exited
            if self._closed_by_us:
                raise GatewayError("attach_closed", "The terminal session was closed; the process goes on", 0, False)
            if closed.code == TAKEN_OVER:
                raise GatewayError("attach_taken_over", "Another attach took the terminal over", 0, False)
            if closed.code == ACCESS_ENDED:
                code = str(last_error.get("code")) if last_error else "unauthenticated"
                message = str(last_error.get("message")) if last_error else f"The terminal was closed ({closed.reason})"
                raise GatewayError(code, message, 0, False, {"close_code": closed.code, "reason": closed.reason})
            reason = f" {closed.reason}" if closed.reason else ""
            raise GatewayError("attach_lost", f"The terminal connection dropped ({closed.code}{reason})", 0, True, {"close_code": closed.code})
        except BaseException:
            # A handler that raised (or a cancel): the session ends, and wait() raises it.
            self._ws.abort()
            raise


class AsyncEndedTerminal:
    """A terminal whose process ended before the attach: its kept output was handed over, and its end is known."""

    def __init__(self, process_id: str, exit: TerminalExit, state: str) -> None:
        self.process_id = process_id
        self._exit = exit
        self._state = state

    def _ended(self) -> GatewayError:
        return GatewayError("invalid_process_state", f"The process is {self._state}: its terminal is closed", 409, False)

    async def write(self, data: Union[str, bytes]) -> None:
        raise self._ended()

    async def resize(self, cols: int, rows: int) -> None:
        raise self._ended()

    async def close(self) -> None:
        return None

    async def wait(self) -> TerminalExit:
        return self._exit
