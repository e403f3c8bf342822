"""What the sync and the async client share and that does no I/O: limits, results, the event-stream parser."""
from __future__ import annotations

import codecs
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Generic, List, Literal, Optional, Sequence, TypeVar, Union

from . import types

T = TypeVar("T")

#: Seconds between two polls of an operation, process or endpoint.
POLL_SECONDS = 0.1
#: The longest run-and-wait the API takes (``?wait_seconds``).
MAX_WAIT_SECONDS = 300
#: The API takes at most 1 MiB of input a call.
STDIN_PIECE = 1024 * 1024
#: Output a command keeps (its events); the run-and-wait answer carries at most 1 MiB of each stream.
MAX_OUTPUT_BYTES = 10 * 1024 * 1024
#: A terminal keeps at most this much output (its replay buffer), or the provider's ceiling if lower.
TERMINAL_OUTPUT_BYTES = 100 * 1024 * 1024
#: Times a broken event stream or download is resumed where it stopped.
RESUMES = 5
#: A shell for ``shell()``: bash where there is one, else sh; interactive either way.
DEFAULT_SHELL = ["/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -i; else exec sh -i; fi"]

OPERATION_ENDED = frozenset(["succeeded", "failed", "cancelled"])
PROCESS_ENDED = frozenset(["succeeded", "failed", "cancelled", "timed_out"])

Stream = Literal["stdout", "stderr"]
Command = Union[str, Sequence[str]]
#: How a raw write meets an existing file (the API's `mode`).
WriteMode = Literal["create", "overwrite", "append"]


def argv(command: Command) -> List[str]:
    """A list is the argv itself; a string is a shell line, run with ``sh -c``."""
    if isinstance(command, str):
        return ["sh", "-c", command]
    return [str(part) for part in command]


def idempotency_key() -> str:
    return f"client-{uuid.uuid4()}"


def backoff(attempt: int) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (100 ms, doubling)."""
    return 0.1 * 2.0 ** (attempt - 1)


@dataclass(frozen=True)
class ExecResult:
    """How a command ended, with its output (text decoded as UTF-8, the exact bytes beside it)."""

    process_id: str
    state: types.ProcessState
    exit_code: Optional[int]
    stdout: str
    stderr: str
    stdout_bytes: bytes = field(repr=False, default=b"")
    stderr_bytes: bytes = field(repr=False, default=b"")


@dataclass(frozen=True)
class TerminalExit:
    """How a terminal's process ended."""

    state: types.ProcessState
    exit_code: Optional[int]


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; ``next_cursor`` asks for the next (None: this was the last)."""

    items: List[T]
    next_cursor: Optional[str]


@dataclass(frozen=True)
class Frame:
    id: Optional[str]
    event: str
    data: str


class SseParser:
    """Server-sent events, fed as bytes arrive: whole frames out (comments and heartbeats dropped)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._buffer = ""

    def feed(self, chunk: bytes) -> List[Frame]:
        self._buffer += self._decoder.decode(chunk).replace("\r\n", "\n")
        frames: List[Frame] = []
        while "\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split("\n\n", 1)
            id_: Optional[str] = None
            event = "message"
            data: List[str] = []
            for line in raw.split("\n"):
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "id":
                    id_ = value
                elif name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
            if data:
                frames.append(Frame(id_, event, "\n".join(data)))
        return frames


def event_payload(frame: Frame) -> Dict[str, Any]:
    parsed = json.loads(frame.data)
    return parsed if isinstance(parsed, dict) else {}
