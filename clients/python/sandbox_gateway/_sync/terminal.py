"""The sync client's terminal: the async session (../_async/terminal.py) run on an event loop of its own, in a
thread of its own, for as long as the session lasts. One thread does all of the connection's reads and writes
(a TLS connection must not be used from two threads at once); the handlers run on it, and ``write``/``resize``
hand their frames to it and wait until they are sent."""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Callable, Coroutine, List, Optional, TypeVar, Union

from .. import types
from .._common import PROCESS_ENDED, TerminalExit
from .._async.terminal import AsyncTerminal, TerminalHandlers, closed_error
from ..errors import GatewayError

T = TypeVar("T")

__all__ = ["EndedTerminal", "LoopThread", "Terminal", "TerminalHandlers"]


class LoopThread:
    """An event loop running in a daemon thread until ``stop``."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="sandbox-gateway-terminal", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> "concurrent.futures.Future[T]":
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: Optional[float] = None) -> T:
        return self.submit(coroutine).result(timeout)

    def stop(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)


class Terminal:
    """An open terminal: ``write`` into it, ``resize`` it, ``close`` it (the process goes on), ``wait`` for its end.

    ``wait`` raises GatewayError when the session ends first: ``attach_closed`` (``close()``), ``attach_taken_over``
    (another attach took the process), ``attach_lost`` (the connection dropped; retryable), or the gateway's
    ``unauthenticated`` / ``forbidden`` once the key was revoked or expired or its project deleted.
    """

    def __init__(self, inner: AsyncTerminal, loop: LoopThread, get_process: Callable[[], types.Process]) -> None:
        self.process_id = inner.process_id
        self._inner = inner
        self._loop = loop
        self._get_process = get_process

        async def outcome() -> TerminalExit:
            return await asyncio.shield(inner._reader)

        self._outcome = loop.submit(outcome())
        # The session is over: its thread ends (what it decided stays in _outcome).
        self._outcome.add_done_callback(lambda _: loop.stop())

    def _call(self, coroutine: Coroutine[Any, Any, None]) -> None:
        if self._outcome.done():
            coroutine.close()
            raise closed_error()
        try:
            sent = self._loop.submit(coroutine)
        except RuntimeError:  # the loop has closed
            coroutine.close()
            raise closed_error()
        # The session may end meanwhile, and its loop with it: then the frame is not waited for.
        either: List["concurrent.futures.Future[Any]"] = [sent, self._outcome]
        concurrent.futures.wait(either, return_when=concurrent.futures.FIRST_COMPLETED)
        if not sent.done():
            raise closed_error()
        sent.result()

    def write(self, data: Union[str, bytes]) -> None:
        """Types bytes (or UTF-8 text) into the terminal, in order."""
        self._call(self._inner.write(data))

    def resize(self, cols: int, rows: int) -> None:
        """Resizes the terminal (1–1000 each way); the program sees SIGWINCH."""
        self._call(self._inner.resize(cols, rows))

    def close(self) -> None:
        """Leaves the terminal: the process goes on (attach again to come back); ``wait`` then raises attach_closed."""
        if not self._outcome.done():
            self._call(self._inner.close())

    def wait(self, timeout: Optional[float] = None) -> TerminalExit:
        """The process's end (``timeout`` seconds at most: then TimeoutError, and the session goes on)."""
        try:
            return self._outcome.result(timeout)
        except GatewayError as e:
            if e.code != "attach_lost":
                raise
            try:
                process = self._get_process()
            except GatewayError:
                raise e
            if process.get("state") in PROCESS_ENDED:
                return TerminalExit(process["state"], process.get("exit_code"))
            raise

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EndedTerminal:
    """A terminal whose process ended before the attach: its kept output was handed over, and its end is known."""

    def __init__(self, process_id: str, exit: TerminalExit, state: str) -> None:
        self.process_id = process_id
        self._exit = exit
        self._state = state

    def _ended(self) -> GatewayError:
        return GatewayError("invalid_process_state", f"The process is {self._state}: its terminal is closed", 409, False)

    def write(self, data: Union[str, bytes]) -> None:
        raise self._ended()

    def resize(self, cols: int, rows: int) -> None:
        raise self._ended()

    def close(self) -> None:
        return None

    def wait(self, timeout: Optional[float] = None) -> TerminalExit:
        return self._exit
